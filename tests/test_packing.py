"""One device-to-host copy per rollout (distrl/packing.py): a pytree packed on the
device comes back whole, and the actor's packed rollout gives exactly the items and
statistics of the rollout, the item function and a device_get done one by one."""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from distrl import agents, packing
from distrl import config as config_lib
from distrl import experiment as experiment_lib
from distrl.acting import rollout
from distrl.nodes.actor import make_act


class _Pair(NamedTuple):
    a: jnp.ndarray
    b: dict


def test_a_packed_tree_comes_back_whole():
    tree = _Pair(
        a=jnp.arange(6, dtype=jnp.float32).reshape(2, 3) / 7,
        b={
            "i": jnp.array([-3, 5], jnp.int32),
            "flag": jnp.array([[True, False], [False, True]]),
            "scalar": jnp.float32(-0.5),
            "u": jnp.array([2**32 - 1], jnp.uint32),
        },
    )
    buffer = jax.jit(packing.pack)(tree)
    assert buffer.dtype == jnp.uint32 and buffer.shape == (6 + 2 + 4 + 1 + 1,)
    back = packing.Layout(jax.eval_shape(lambda: tree)).unpack(buffer)
    assert jax.tree.structure(back) == jax.tree.structure(tree)
    for got, want in zip(jax.tree.leaves(back), jax.tree.leaves(tree)):
        assert isinstance(got, np.ndarray) and got.dtype == want.dtype
        np.testing.assert_array_equal(got, np.asarray(want))


def test_a_leaf_that_is_not_four_bytes_or_bool_is_refused():
    with pytest.raises(TypeError, match="int8"):
        packing.pack({"x": jnp.zeros((2,), jnp.int8)})


def test_a_packed_function_keeps_one_layout_per_input_structure():
    def fn(x, tail):
        out = x if tail is None else x + tail
        return out * 2, {"sum": out.sum(), "first": out[:1] > 0}

    packed_fn = packing.PackedFn(fn)
    x = jnp.arange(4, dtype=jnp.float32)
    state, packed = packed_fn(x, None)  # the first call: no tail
    np.testing.assert_array_equal(state, x * 2)
    out = packed_fn.unpack(packed)
    assert float(out["sum"]) == 6.0 and out["first"].tolist() == [False]
    _, packed = packed_fn(x, jnp.ones((4,), jnp.float32))
    assert float(packed_fn.unpack(packed)["sum"]) == 10.0


@pytest.mark.parametrize("algorithm", ["dqn", "ppo", "reinforce"])
def test_the_actors_packed_rollout_equals_the_unpacked_one(algorithm):
    c = config_lib.base_config(algorithm)
    c.actor.num_envs, c.actor.unroll_length = 8, 4
    env = experiment_lib.Experiment(c).env
    agent_config = experiment_lib.Experiment(c).agent_config
    agent = agents.make_agent(agent_config, env)
    params = agent.init(jax.random.PRNGKey(0)).params
    unroll = rollout.make_rollout(env, agent.policy, c.actor.unroll_length)
    to_items = experiment_lib.Experiment(c).pipeline.item_fn(agent_config, c, env)
    act = make_act(unroll, to_items)
    carry = rollout.init_carry(env, jax.random.PRNGKey(1), c.actor.num_envs)
    packed_state = plain_state = (carry, None)
    for i in range(3):  # the first call has no tail, the later ones do
        key = jax.random.PRNGKey(10 + i)
        (carry, tail), output = act(params, packed_state[0], key, 0.3, packed_state[1])
        packed_state = (carry, tail)
        items, stats = act.unpack(output)
        p_carry, chunk, p_stats = unroll(params, plain_state[0], key, 0.3)
        p_items, p_tail = to_items(plain_state[1], chunk)
        plain_state = (p_carry, p_tail)
        want = jax.device_get((p_items, p_stats))
        assert jax.tree.structure((items, stats)) == jax.tree.structure(want)
        for got, expected in zip(jax.tree.leaves((items, stats)), jax.tree.leaves(want)):
            assert got.dtype == expected.dtype
            np.testing.assert_array_equal(got, expected)
