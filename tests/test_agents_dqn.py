"""DQN / tabular Q: loss known answers, gradients, target updates, acting, one compile."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import rlax

from distrl import agents
from distrl.agents import dqn
from distrl.types import QTransition

SPEC = agents.EnvSpec(obs_size=4, num_actions=4)


def table_params(q_table, name="table"):
    return {name: {"w": jnp.asarray(q_table, jnp.float32)}}


# Online and target Q tables [4 cells, 4 actions] for the hand-computed batch.
Q_ONLINE = np.array([[0, 1, 2, 3], [1, 5, 2, 0], [0.25, 0, 0, 0], [0, 0, 0, 0]], np.float32)
Q_TARGET = np.array([[0, 0, 0, 0], [4, 3, 2, 1], [0, 0, 0, 0], [0, 0, 0, 0]], np.float32)


def hand_batch():
    """s0 -a1-> s1 (r 0.5, discount 0.9); s2 -a0-> terminal (r -1, discount 0)."""
    eye = np.eye(4, dtype=np.float32)
    return QTransition(
        observation=jnp.asarray(eye[[0, 2]]),
        action=jnp.array([1, 0], jnp.int32),
        reward=jnp.array([0.5, -1.0]),
        discount=jnp.array([0.9, 0.0]),
        next_observation=jnp.asarray(eye[[1, 3]]),
    )


def huber(x, delta=1.0):
    x = abs(x)
    return 0.5 * x * x if x <= delta else delta * (x - 0.5 * delta)


@pytest.mark.parametrize(
    "double_q, loss, td0",
    [
        # q-learning: 0.5 + 0.9 * max(target Q(s1)) - Q(s0, 1) = 0.5 + 3.6 - 1
        (False, "l2", 3.1),
        (False, "huber", 3.1),
        # double: argmax online Q(s1) = 1 -> target Q(s1, 1) = 3: 0.5 + 2.7 - 1
        (True, "l2", 2.2),
        (True, "huber", 2.2),
    ],
)
def test_loss_known_answer(double_q, loss, td0):
    config = dqn.DQNConfig(network="table", double_q=double_q, loss=loss)
    agent = dqn.make_agent(config, SPEC)
    td1 = -1.0 - 0.25  # terminal: r - Q(s2, 0), no bootstrap
    per = [0.5 * td0**2, 0.5 * td1**2] if loss == "l2" else [huber(td0), huber(td1)]
    value, metrics = dqn.loss_fn(
        agent.network, config, table_params(Q_ONLINE), table_params(Q_TARGET), hand_batch()
    )
    np.testing.assert_allclose(value, np.mean(per), rtol=1e-6)
    np.testing.assert_allclose(metrics["td_abs"], (abs(td0) + abs(td1)) / 2, rtol=1e-6)
    np.testing.assert_allclose(metrics["q_taken"], (1.0 + 0.25) / 2, rtol=1e-6)  # Q(s0,1), Q(s2,0)
    assert metrics["terminal_frac"] == 0.5  # the second transition ends its episode


def test_loss_gradient_known_answer():
    """d(mean 0.5 td^2)/dQ(s, a) = -td / N on the taken entries, 0 elsewhere."""
    config = dqn.DQNConfig(network="table", double_q=False, loss="l2")
    agent = dqn.make_agent(config, SPEC)
    grads = jax.grad(
        lambda p: dqn.loss_fn(agent.network, config, p, table_params(Q_TARGET), hand_batch())[0]
    )(table_params(Q_ONLINE))
    expected = np.zeros((4, 4), np.float32)
    expected[0, 1] = -3.1 / 2
    expected[2, 0] = 1.25 / 2
    np.testing.assert_allclose(grads["table"]["w"], expected, rtol=1e-6, atol=1e-7)


def test_mlp_loss_shapes_and_gradients():
    config = dqn.DQNConfig(hidden_sizes=(8,))
    agent = dqn.make_agent(config, SPEC)
    state = agent.init(jax.random.PRNGKey(0))
    batch = hand_batch()
    loss, _ = dqn.loss_fn(agent.network, config, state.params, state.target_params, batch)
    assert loss.shape == ()
    grads = jax.grad(lambda p: dqn.loss_fn(agent.network, config, p, p, batch)[0])(state.params)
    assert jax.tree.structure(grads) == jax.tree.structure(state.params)
    leaves = jax.tree.leaves(grads)
    assert all(np.all(np.isfinite(g)) for g in leaves)
    assert any(np.any(g != 0) for g in leaves)


def test_periodic_target_copy():
    config = dqn.DQNConfig(hidden_sizes=(8,), target_update_period=3)
    agent = dqn.make_agent(config, SPEC)
    state = agent.init(jax.random.PRNGKey(0))
    batch = hand_batch()
    same = lambda a, b: all(
        np.array_equal(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b))
    )
    for step in range(1, 7):
        old_target = state.target_params
        state, _ = agent.update(state, batch)
        assert int(state.step) == step
        if step % 3 == 0:
            assert same(state.target_params, state.params)
        else:
            assert same(state.target_params, old_target)


def test_polyak_target():
    config = dqn.DQNConfig(hidden_sizes=(8,), target_update_period=1, target_update_tau=0.1)
    agent = dqn.make_agent(config, SPEC)
    state = agent.init(jax.random.PRNGKey(0))
    new_state, _ = agent.update(state, hand_batch())
    jax.tree.map(
        lambda t, p, t0: np.testing.assert_allclose(t, 0.1 * p + 0.9 * t0, rtol=1e-5, atol=1e-7),
        new_state.target_params,
        new_state.params,
        state.target_params,
    )


def test_update_compiles_once():
    agent = dqn.make_agent(dqn.DQNConfig(hidden_sizes=(8,)), SPEC)
    state = agent.init(jax.random.PRNGKey(0))
    batch = hand_batch()
    state, _ = agent.update(state, batch)
    size = agent.update._cache_size()
    for i in range(3):
        new_batch = batch._replace(reward=batch.reward + i, action=(batch.action + i) % 4)
        state, metrics = agent.update(state, new_batch)
    assert agent.update._cache_size() == size == 1
    assert set(metrics) >= {"loss", "td_abs", "grad_norm"}


def test_policy_epsilon_greedy():
    config = dqn.DQNConfig(network="table")
    agent = dqn.make_agent(config, SPEC)
    params = table_params(Q_ONLINE)
    obs = jnp.tile(jnp.eye(4)[:1], (2000, 1))  # cell 0: greedy action 3
    actions, extras = jax.jit(agent.policy)(params, jax.random.PRNGKey(1), obs, 0.0)
    assert actions.dtype == jnp.int32 and actions.shape == (2000,) and extras == {}
    assert np.all(actions == 3)
    actions, _ = jax.jit(agent.policy)(params, jax.random.PRNGKey(1), obs, 1.0)
    counts = np.bincount(np.asarray(actions), minlength=4) / 2000
    np.testing.assert_allclose(counts, 0.25, atol=0.04)  # uniform when exploring
    actions, _ = jax.jit(agent.policy)(params, jax.random.PRNGKey(2), obs, 0.4)
    np.testing.assert_allclose(np.mean(actions == 3), 0.6 + 0.4 / 4, atol=0.04)
    np.testing.assert_array_equal(agent.greedy(params, jnp.eye(4)), [3, 1, 0, 0])
    np.testing.assert_allclose(agent.value(params, jnp.eye(4)), [3, 5, 0.25, 0])


def test_epsilon_schedule_is_linear():
    config = dqn.DQNConfig(epsilon_init=1.0, epsilon_final=0.1, epsilon_decay_steps=1000)
    agent = dqn.make_agent(config, SPEC)
    np.testing.assert_allclose(
        [agent.epsilon(s) for s in (0, 500, 1000, 5000)], [1.0, 0.55, 0.1, 0.1], rtol=1e-6
    )


def test_config_from_dict_and_lists():
    fields = dataclasses.asdict(dqn.DQNConfig())
    fields["hidden_sizes"] = [16, 16]  # ml_collections may hand lists over
    config = dqn.DQNConfig(**fields)
    assert config.hidden_sizes == (16, 16) and hash(config)
    tabular = agents.make_config("tabular")
    assert tabular.network == "table" and isinstance(tabular, dqn.DQNConfig)


def test_learning_rate_decays_linearly_then_stays():
    """SGD with rate 1.0 decaying to 0.2 over 4 steps: steps of 1.0, 0.8, 0.6, 0.4, 0.2, 0.2."""
    from distrl.agents import base

    opt = base.make_optimizer(1.0, 0.0, "sgd", decay_steps=4, final_learning_rate=0.2)
    params = {"w": jnp.zeros(())}
    state = opt.init(params)
    sizes = []
    for _ in range(6):
        updates, state = opt.update({"w": jnp.ones(())}, state, params)
        sizes.append(-float(updates["w"]))
    np.testing.assert_allclose(sizes, [1.0, 0.8, 0.6, 0.4, 0.2, 0.2], atol=1e-6)
    config = agents.make_config("a2c", learning_rate_decay_steps=100, learning_rate_final=1e-4)
    assert config.learning_rate_decay_steps == 100  # every preset carries the fields


def test_importance_weights_scale_each_transitions_loss():
    """Known answer: loss = mean(w_i * l_i); the priorities are |TD| whatever the weights."""
    config = dqn.DQNConfig(network="table", double_q=False, loss="l2")
    agent = dqn.make_agent(config, SPEC)
    args = (agent.network, config, table_params(Q_ONLINE), table_params(Q_TARGET), hand_batch())
    weights = jnp.array([0.5, 0.0])
    value, metrics = dqn.loss_fn(*args, weights)
    np.testing.assert_allclose(value, (0.5 * 0.5 * 3.1**2 + 0.0) / 2, rtol=1e-6)
    np.testing.assert_allclose(metrics["priorities"], [3.1, 1.25], rtol=1e-6)
    grads = jax.grad(lambda p: dqn.loss_fn(agent.network, config, p, *args[3:], weights)[0])(
        table_params(Q_ONLINE)
    )
    expected = np.zeros((4, 4), np.float32)
    expected[0, 1] = -0.5 * 3.1 / 2  # the zero-weight transition moves nothing
    np.testing.assert_allclose(grads["table"]["w"], expected, rtol=1e-6, atol=1e-7)


def test_update_applies_the_weights():
    """The jitted update with weights [1, 0] equals the update on the first transition."""
    config = dqn.DQNConfig(
        network="table",
        double_q=False,
        loss="l2",
        optimizer="sgd",
        learning_rate=1.0,
        max_grad_norm=0.0,
    )
    agent = dqn.make_agent(config, SPEC)
    state = agent.init(jax.random.PRNGKey(0))
    state = state._replace(params=table_params(Q_ONLINE), target_params=table_params(Q_TARGET))
    weighted, metrics = agent.update(state, hand_batch(), jnp.array([1.0, 0.0]))
    first = jax.tree.map(lambda x: x[:1], hand_batch())
    alone, _ = agent.update(state, first)
    # mean over 2 with one zero weight = half the single-transition gradient
    delta_w = weighted.params["table"]["w"] - Q_ONLINE
    delta_1 = alone.params["table"]["w"] - Q_ONLINE
    np.testing.assert_allclose(delta_w, 0.5 * delta_1, rtol=1e-6, atol=1e-7)
    assert metrics["priorities"].shape == (2,)


def rlax_td_errors(network, params, target_params, batch: QTransition, double_q: bool):
    """TD errors [N] as rlax computes them, one transition at a time (vmapped)."""

    def one(t: QTransition):
        q_tm1 = network.apply(params, t.observation)  # [A]
        q_t_value = network.apply(target_params, t.next_observation)  # [A]
        if double_q:
            q_t_selector = network.apply(params, t.next_observation)  # [A]
            return rlax.double_q_learning(
                q_tm1, t.action, t.reward, t.discount, q_t_value, q_t_selector
            )
        return rlax.q_learning(q_tm1, t.action, t.reward, t.discount, q_t_value)

    return jax.vmap(one)(batch)


def random_batch(key, n=64, obs_size=4, num_actions=4) -> QTransition:
    """Random transitions [N]: a quarter of them terminal (discount 0)."""
    keys = jax.random.split(key, 5)
    return QTransition(
        observation=jax.random.normal(keys[0], (n, obs_size)),
        action=jax.random.randint(keys[1], (n,), 0, num_actions),
        reward=jax.random.normal(keys[2], (n,)),
        discount=0.9 * (jax.random.uniform(keys[3], (n,)) > 0.25),
        next_observation=jax.random.normal(keys[4], (n, obs_size)),
    )


def rlax_loss(network, config, params, target_params, batch, weights):
    """DQN's weighted mean loss [] from rlax's per-example TD errors."""
    td = rlax_td_errors(network, params, target_params, batch, config.double_q)
    huber = config.loss == "huber"
    per = rlax.huber_loss(td, config.huber_delta) if huber else rlax.l2_loss(td)
    return jnp.mean(per * weights)


def dqn_loss(network, config, params, target_params, batch, weights):
    return dqn.loss_fn(network, config, params, target_params, batch, weights)[0]


@pytest.mark.parametrize("double_q", [True, False])
@pytest.mark.parametrize("loss", ["huber", "l2"])
def test_batched_td_errors_loss_and_gradients_are_rlaxs(double_q, loss):
    """The one-hot selections over the whole batch give rlax's per-example numbers."""
    config = dqn.DQNConfig(hidden_sizes=(16,), double_q=double_q, loss=loss)
    agent = dqn.make_agent(config, SPEC)
    params = agent.init(jax.random.PRNGKey(0)).params
    target = agent.init(jax.random.PRNGKey(1)).params
    for seed in range(3):
        batch = random_batch(jax.random.PRNGKey(10 + seed))
        weights = jax.random.uniform(jax.random.PRNGKey(20 + seed), (64,))
        td, _ = dqn.td_error(agent.network, params, target, batch, double_q)
        want_td = rlax_td_errors(agent.network, params, target, batch, double_q)
        np.testing.assert_allclose(td, want_td, rtol=1e-6, atol=1e-6)
        args = (agent.network, config, params, target, batch, weights)
        np.testing.assert_allclose(dqn_loss(*args), rlax_loss(*args), rtol=1e-6, atol=1e-6)
        grads = jax.grad(dqn_loss, argnums=2)(*args)
        want_grads = jax.grad(rlax_loss, argnums=2)(*args)
        for got, want in zip(jax.tree.leaves(grads), jax.tree.leaves(want_grads)):
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_selecting_actions_by_one_hot_is_indexing():
    """Values and gradients of `select_actions` equal take_along_axis's, exactly."""
    values = jax.random.normal(jax.random.PRNGKey(0), (5, 7, 4))
    actions = jax.random.randint(jax.random.PRNGKey(1), (5, 7), 0, 4)

    def indexed(v):
        return jnp.take_along_axis(v, actions[..., None], axis=-1)[..., 0]

    np.testing.assert_array_equal(agents.base.select_actions(values, actions), indexed(values))
    upstream = jax.random.normal(jax.random.PRNGKey(2), (5, 7))
    grad_of = lambda f: jax.grad(lambda v: jnp.sum(f(v) * upstream))(values)  # noqa: E731
    np.testing.assert_array_equal(
        grad_of(lambda v: agents.base.select_actions(v, actions)), grad_of(indexed)
    )


@pytest.mark.parametrize("name", ["dqn", "tabular"])
def test_the_update_has_no_gather_or_scatter(name):
    """No per-example indexing is left for a TPU to run element by element: the
    lowered update holds no gather (nor the scatter of its gradient)."""
    agent = agents.make_agent(agents.make_config(name), SPEC)
    state = agent.init(jax.random.PRNGKey(0))
    text = agent.update.lower(state, random_batch(jax.random.PRNGKey(1)), jnp.ones(64)).as_text()
    assert "stablehlo.gather" not in text and "stablehlo.scatter" not in text
