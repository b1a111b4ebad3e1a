"""A pytree of arrays as the 32-bit columns of one matrix [..., F], so that gathers and
scatters over its leading dimension move whole rows in one op.

Why: a TPU lays an array such as f32[8192, 10, 10, 4] out with the batch dimension
minor, and a gather of its rows then moves one element at a time (ppo_breakout's
minibatch shuffle took 84% of its update); a [N, F] matrix keeps each row contiguous,
and one matrix for every field makes one gather instead of one per field
(docs/decisions.md, "Shuffles and replay move packed rows").
"""

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np


class Layout(NamedTuple):
    """Where each leaf lies in the packed columns (hashable: a jitted carry's static part)."""

    treedef: Any
    shapes: tuple  # each leaf's shape after the leading dimensions
    dtypes: tuple


def layout_of(tree, lead: int = 1) -> Layout:
    """The layout of `tree`, whose leaves share `lead` leading dimensions."""
    leaves, treedef = jax.tree.flatten(tree)
    shapes = tuple(tuple(np.shape(x))[lead:] for x in leaves)
    return Layout(treedef, shapes, tuple(jnp.asarray(x).dtype for x in leaves))


def width(layout: Layout) -> int:
    """F: the packed columns of one row."""
    return sum(int(np.prod(shape)) for shape in layout.shapes)


def _to_bits(x: jax.Array) -> jax.Array:
    # 32-bit leaves keep their bits; narrower ones (bool, int8, bf16) are exact in float32
    if jnp.dtype(x.dtype).itemsize != 4:
        x = x.astype(jnp.float32)
    return jax.lax.bitcast_convert_type(x, jnp.uint32)


def _from_bits(bits: jax.Array, dtype) -> jax.Array:
    if jnp.dtype(dtype).itemsize == 4:
        return jax.lax.bitcast_convert_type(bits, dtype)
    return jax.lax.bitcast_convert_type(bits, jnp.float32).astype(dtype)


def pack(tree, lead: int = 1) -> jax.Array:
    """uint32 [*lead dims, F]: every leaf's trailing dimensions flattened side by side."""
    leaves = jax.tree.leaves(tree)
    lead_shape = jnp.shape(leaves[0])[:lead]
    return jnp.concatenate([_to_bits(jnp.reshape(x, lead_shape + (-1,))) for x in leaves], axis=-1)


def unpack(matrix: jax.Array, layout: Layout):
    """The tree `pack` made, with the matrix's leading dimensions."""
    lead_shape, out, at = matrix.shape[:-1], [], 0
    for shape, dtype in zip(layout.shapes, layout.dtypes):
        size = int(np.prod(shape))
        out.append(_from_bits(matrix[..., at : at + size], dtype).reshape(lead_shape + shape))
        at += size
    return jax.tree.unflatten(layout.treedef, out)


def take(tree, index: jax.Array):
    """`tree`'s rows at `index` (any shape): one gather of packed rows."""
    return unpack(pack(tree)[index], layout_of(tree))
