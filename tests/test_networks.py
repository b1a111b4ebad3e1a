"""Networks: shapes, parameter layout, the table network, shared vs separate torsos."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from distrl import networks

KEY = jax.random.PRNGKey(0)
O, A = 16, 4


def shapes(params):
    return jax.tree.map(jnp.shape, params)


def test_q_network_shapes():
    net = networks.make_q_network((32, 16), A)
    params = jax.jit(net.init)(KEY, jnp.zeros((O,)))
    assert shapes(params) == {
        "torso_0": {"w": (O, 32), "b": (32,)},
        "torso_1": {"w": (32, 16), "b": (16,)},
        "q_head": {"w": (16, A), "b": (A,)},
    }
    assert net.apply(params, jnp.zeros((O,))).shape == (A,)
    assert net.apply(params, jnp.zeros((7, O))).shape == (7, A)
    assert net.apply(params, jnp.zeros((3, 5, O))).shape == (3, 5, A)


def test_table_network_is_the_q_table():
    net = networks.make_table_network(A)
    params = jax.jit(net.init)(KEY, jnp.zeros((O,)))
    assert shapes(params) == {"table": {"w": (O, A)}}
    np.testing.assert_array_equal(params["table"]["w"], 0.0)  # tabular Q starts at 0
    table = jnp.arange(O * A, dtype=jnp.float32).reshape(O, A)
    q = net.apply({"table": {"w": table}}, jnp.eye(O))
    np.testing.assert_array_equal(q, table)  # row s of the table for one-hot s
    assert networks.make_dqn_network("table", (64,), A).apply(params, jnp.eye(O)).shape == (O, A)


@pytest.mark.parametrize("shared", [False, True])
def test_actor_critic_shapes(shared):
    net = networks.make_actor_critic_network((8,), A, shared_torso=shared)
    params = jax.jit(net.init)(KEY, jnp.zeros((O,)))
    torsos = {"torso_0"} if shared else {"policy_torso_0", "value_torso_0"}
    assert set(params) == torsos | {"policy_head", "value_head"}
    logits, value = net.apply(params, jnp.zeros((5, O)))
    assert logits.shape == (5, A) and value.shape == (5,)
    logits, value = net.apply(params, jnp.zeros((O,)))
    assert logits.shape == (A,) and value.shape == ()


def test_linear_actor_critic_without_hidden_layers():
    net = networks.make_actor_critic_network((), A)
    params = jax.jit(net.init)(KEY, jnp.zeros((O,)))
    assert shapes(params) == {
        "policy_head": {"w": (O, A), "b": (A,)},
        "value_head": {"w": (O, 1), "b": (1,)},
    }
    logits, _ = net.apply(params, jnp.eye(O))
    assert float(jnp.max(jnp.abs(logits))) < 0.1  # small head init: near-uniform policy


def test_gradients_flow_to_every_parameter():
    net = networks.make_actor_critic_network((8, 8), A, shared_torso=False)
    params = jax.jit(net.init)(KEY, jnp.zeros((O,)))
    obs = jax.nn.one_hot(jnp.arange(4), O)

    def loss(p):
        logits, value = net.apply(p, obs)
        return jnp.sum(jax.nn.log_softmax(logits)[:, 0]) + jnp.sum(value)

    grads = jax.jit(jax.grad(loss))(params)
    assert all(np.any(g != 0) for g in jax.tree.leaves(grads))


def test_bad_names_raise():
    with pytest.raises(ValueError):
        networks.make_dqn_network("conv", (8,), A)
    with pytest.raises(ValueError):
        networks.make_q_network((8,), A, activation="swish").init(KEY, jnp.zeros((O,)))
