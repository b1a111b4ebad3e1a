"""One device-to-host copy for a whole pytree: packed into one flat buffer of 32-bit
words on the device (inside the jit that made it) and unpacked on the host as numpy
views of that buffer.

`jax.device_get` of a pytree pays for each leaf, and for an actor's rollout output
(items, episode statistics: 10 to 15 small leaves) that costs more than the copy
itself (docs/decisions.md, "The learner publishes only finished updates").
"""

import math

import jax
import jax.numpy as jnp
import numpy as np

_WORD = jnp.uint32


def _words(x: jax.Array) -> jax.Array:
    """A leaf as flat 32-bit words: bool as 0/1, 4-byte types bit for bit."""
    if x.dtype == jnp.bool_:
        return x.astype(_WORD).reshape(-1)
    if x.dtype.itemsize != 4:
        raise TypeError(f"packing: leaf of dtype {x.dtype}; only 4-byte types and bool")
    return jax.lax.bitcast_convert_type(x, _WORD).reshape(-1)


def pack(tree) -> jax.Array:
    """uint32 [N]: every leaf of `tree`, in tree order (call inside a jit)."""
    leaves = [_words(jnp.asarray(x)) for x in jax.tree.leaves(tree)]
    return jnp.concatenate(leaves) if leaves else jnp.zeros((0,), _WORD)


class Layout:
    """Where each leaf of a tree sits in its packed buffer: `unpack` makes the tree
    again from the host copy, every leaf a view (bool leaves a converted copy)."""

    def __init__(self, abstract_tree):
        """`abstract_tree`: the tree's leaves as anything with .shape and .dtype
        (`jax.eval_shape`'s output)."""
        leaves, self._treedef = jax.tree.flatten(abstract_tree)
        self._leaves = []
        offset = 0
        for leaf in leaves:
            size = math.prod(leaf.shape)
            self._leaves.append((offset, size, tuple(leaf.shape), np.dtype(leaf.dtype)))
            offset += size
        self.words = offset

    def unpack(self, buffer):
        """The tree from `buffer` (the packed jax array, copied to the host here once,
        or its numpy copy); a buffer [..., words] of several (one per step) gives
        leaves [..., *shape]."""
        host = np.asarray(buffer)
        if host.shape[-1:] != (self.words,):
            raise ValueError(f"packing: buffer of shape {host.shape}; expected (..., {self.words})")
        leaves = [self.leaf(host, i) for i in range(len(self._leaves))]
        return jax.tree.unflatten(self._treedef, leaves)

    def leaf(self, host: np.ndarray, index: int) -> np.ndarray:
        """Leaf `index` (in tree order) of the numpy buffer `host` [..., words]: a view
        (a bool leaf a converted copy)."""
        offset, size, shape, dtype = self._leaves[index]
        words = host[..., offset : offset + size]
        leaf = words.astype(np.bool_) if dtype == np.bool_ else words.view(dtype)
        return leaf.reshape(host.shape[:-1] + shape)


class PackedFn:
    """`fn(*args) -> (state, output)` jitted so that `output` leaves the device as one
    packed buffer: `__call__` returns (state, packed) at once (asynchronous dispatch),
    `unpack(packed)` the output as numpy. Each input structure (e.g. an item function's
    first call, without a tail) gets its layout from `jax.eval_shape`, once."""

    def __init__(self, fn):
        self._fn = fn
        self._jitted = jax.jit(lambda *args: _pack_output(fn(*args)))
        self._layouts = {}

    def __call__(self, *args):
        structure = jax.tree.structure(args)
        if structure not in self._layouts:
            _, output = jax.eval_shape(self._fn, *args)
            self._layouts[structure] = Layout(output)
        state, packed = self._jitted(*args)
        return state, (packed, self._layouts[structure])

    @staticmethod
    def unpack(packed):
        buffer, layout = packed
        return layout.unpack(buffer)


class OnHost:
    """An item function whose work needs no JAX: numpy in, numpy out (the chunk itself
    as its item). A host-stepped actor calls it in place on its numpy chunk, where a
    jitted call would copy the chunk to the device and back, a cost per chunk for
    nothing; inside a JAX actor's jit it is traced like any function."""

    def __init__(self, fn):
        self._fn = fn

    def __call__(self, *args):
        return self._fn(*args)


def _pack_output(result):
    state, output = result
    return state, pack(output)
