"""Packed rows (`distrl.agents.rows`): every dtype a sample or a replay slot holds comes
back bit for bit, and a gather of packed rows picks the same rows as indexing each field."""

import jax
import jax.numpy as jnp
import numpy as np

from distrl.agents import rows


def _tree(n):
    rng = np.random.default_rng(0)
    return dict(
        image=jnp.asarray(rng.normal(size=(n, 3, 2, 2)), jnp.float32),
        action=jnp.asarray(rng.integers(-5, 5, size=n), jnp.int32),
        done=jnp.asarray(rng.integers(0, 2, size=n), jnp.bool_),
        small=jnp.asarray(rng.integers(-128, 127, size=(n, 2)), jnp.int8),
        half=jnp.asarray(rng.normal(size=n), jnp.bfloat16),
        nan=jnp.full((n,), jnp.nan, jnp.float32),
    )


def _same(a, b):
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        assert x.dtype == y.dtype and x.shape == y.shape
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_pack_then_unpack_gives_every_leaf_back_bit_for_bit():
    tree = _tree(6)
    layout = rows.layout_of(tree)
    matrix = rows.pack(tree)
    assert matrix.shape == (6, rows.width(layout)) == (6, 12 + 1 + 1 + 2 + 1 + 1)
    assert matrix.dtype == jnp.uint32
    _same(rows.unpack(matrix, layout), tree)


def test_take_picks_the_rows_indexing_each_field_picks_in_any_index_shape():
    tree = _tree(10)
    index = jnp.asarray([[3, 0, 9], [9, 1, 4]])
    got = jax.jit(rows.take)(tree, index)
    _same(got, jax.tree.map(lambda x: x[index], tree))
    assert got["image"].shape == (2, 3, 3, 2, 2)


def test_a_layout_is_hashable_and_equal_for_the_same_structure():
    a, b = rows.layout_of(_tree(4)), rows.layout_of(_tree(7))
    assert a == b and hash(a) == hash(b)
    assert rows.layout_of(_tree(4), lead=0) != a
