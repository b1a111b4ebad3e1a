"""`Agent.update_many`: K updates on stacked batches [K, ...] in one jitted scan give
what K `update` calls in a row give (the state and each update's metrics, stacked
[K, ...]), for the replay learners (DQN with importance weights, tabular Q, SAC, TD3,
R2D2) and an on-policy one whose observation statistics merge after each update."""

import operator

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from distrl import agents, envs, spaces
from distrl.types import CoreChunk, QTransition, Transition

K = 3
N = 8
DISCRETE = agents.EnvSpec(obs_size=4, num_actions=3)
BOX = envs.EnvSpec((3,), "float32", 0, 5, spaces.box((2,), -1.0, 1.0))


def _transitions(key, actions) -> QTransition:
    """Random n-step transitions [K, N] with the given actions; a quarter terminal."""
    keys = jax.random.split(key, 4)
    obs_size = BOX.obs_size if actions.ndim == 3 else DISCRETE.obs_size
    return QTransition(
        observation=jax.random.normal(keys[0], (K, N, obs_size)),
        action=actions,
        reward=jax.random.normal(keys[1], (K, N)),
        discount=0.9 * (jax.random.uniform(keys[2], (K, N)) > 0.25),
        next_observation=jax.random.normal(keys[3], (K, N, obs_size)),
    )


def _chunk(key, shape, num_actions) -> Transition:
    """A random chunk `Transition` of `shape` ([K, T, N]) with discrete actions."""
    keys = jax.random.split(key, 4)
    last = jax.random.uniform(keys[0], shape) < 0.2
    return Transition(
        observation=jax.random.normal(keys[1], (*shape, DISCRETE.obs_size)),
        action=jax.random.randint(keys[2], shape, 0, num_actions),
        reward=jax.random.normal(keys[3], shape),
        discount=jnp.where(last, 0.0, 1.0),
        last=last,
        next_observation=jax.random.normal(keys[0], (*shape, DISCRETE.obs_size)),
        extras={"log_prob": jnp.full(shape, -np.log(num_actions))},
    )


def _setup(name: str, key):
    """(agent, batches [K, ...], importance weights [K, N] or None) for a preset."""
    batch_key, weight_key = jax.random.split(key)
    weights = jax.random.uniform(weight_key, (K, N), minval=0.1, maxval=1.0)
    if name in ("dqn", "tabular"):
        config = agents.make_config(name, **({"hidden_sizes": (16,)} if name == "dqn" else {}))
        actions = jax.random.randint(key, (K, N), 0, DISCRETE.num_actions)
        batches = _transitions(batch_key, actions)
        return agents.make_agent(config, DISCRETE), batches, weights if name == "dqn" else None
    if name in ("sac", "td3"):
        config = agents.make_config(name, hidden_sizes=(16,))  # TD3: an actor step at 2
        actions = jax.random.uniform(key, (K, N, 2), minval=-1.0, maxval=1.0)
        return agents.make_agent(config, BOX), _transitions(batch_key, actions), weights
    if name == "r2d2":
        config = agents.make_config(name, hidden_sizes=(16,), core_size=8, burn_in=2, n_step=2)
        chunk = _chunk(batch_key, (K, 8, N), DISCRETE.num_actions)
        start = (jax.random.normal(key, (K, 1, N, 8)),)
        return agents.make_agent(config, DISCRETE), CoreChunk(chunk, start), weights
    config = agents.make_config(name, hidden_sizes=(16,), normalize_observations=True)
    return agents.make_agent(config, DISCRETE), _chunk(batch_key, (K, 4, N), 3), None


def _assert_close(got, want, exact: bool):
    assert jax.tree.structure(got) == jax.tree.structure(want)
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
        if exact:
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def _in_a_row(agent, state, batches, weights, count):
    """`count` calls of `agent.update`; (state, metrics stacked [count, ...])."""
    metrics = []
    for k in range(count):
        extra = () if weights is None else (weights[k],)
        state, m = agent.update(state, jax.tree.map(operator.itemgetter(k), batches), *extra)
        metrics.append(m)
    return state, jax.tree.map(lambda *ms: jnp.stack(ms), *metrics)


@pytest.mark.parametrize("name", ["dqn", "tabular", "sac", "td3", "r2d2", "a2c"])
def test_k_updates_in_one_call_are_k_updates_in_a_row(name):
    agent, batches, weights = _setup(name, jax.random.PRNGKey(0))
    state = agent.init(jax.random.PRNGKey(1))
    for count in (1, K):
        first = jax.tree.map(operator.itemgetter(slice(count)), (batches, weights))
        got_state, got_metrics = agent.update_many(state, *first)
        want_state, want_metrics = _in_a_row(agent, state, batches, weights, count)
        # one update in a scan is the update itself, to the bit; K of them may round
        # differently inside the loop
        _assert_close(got_state, want_state, exact=count == 1)
        _assert_close(got_metrics, want_metrics, exact=count == 1)
        assert int(got_state.step) == count
    if name != "a2c":  # a replay learner: the new priority of every item of every batch
        assert got_metrics["priorities"].shape == (K, N)
    assert all(m.shape[0] == K for m in jax.tree.leaves(got_metrics))
    assert agent.update_many._cache_size() == 2  # one compile per K


def test_update_many_without_weights_is_uniform_weights():
    """DQN's prioritized batches and plain ones take the same call."""
    agent, batches, _ = _setup("dqn", jax.random.PRNGKey(2))
    state = agent.init(jax.random.PRNGKey(3))
    plain, plain_metrics = agent.update_many(state, batches)
    ones, ones_metrics = agent.update_many(state, batches, jnp.ones((K, N)))
    _assert_close(plain, ones, exact=False)
    _assert_close(plain_metrics, ones_metrics, exact=False)
