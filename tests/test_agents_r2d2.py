"""R2D2's loss pieces (issue 39 item 2) against hand-computed values: value rescaling,
n-step windows that stop at episode ends, the burn-in (state only, no gradient), double
Q through a scripted recurrent network, the state reset inside a sequence, and the
priority mix of a sequence's |TD|."""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from distrl import agents
from distrl.agents import r2d2, recurrent
from distrl.types import CoreChunk, Transition


def _config(**overrides):
    return r2d2.R2D2Config(**overrides)


def _sequence(rewards, discounts, lasts, actions=None, obs=None, next_obs=None):
    n = len(rewards)
    obs = np.zeros((n, 1), np.float32) if obs is None else np.asarray(obs, np.float32)[:, None]
    return Transition(
        observation=obs,
        action=np.zeros(n, np.int32) if actions is None else np.asarray(actions, np.int32),
        reward=np.asarray(rewards, np.float32),
        discount=np.asarray(discounts, np.float32),
        last=np.asarray(lasts, bool),
        next_observation=obs if next_obs is None else np.asarray(next_obs, np.float32)[:, None],
        extras={},
    )


def test_value_rescaling_is_h_and_its_inverse():
    config = _config()
    # h(3) = sign(3) (sqrt(3 + 1) - 1) + 1e-3 x 3
    np.testing.assert_allclose(r2d2.rescale(config, 3.0), 1.003, rtol=1e-6)
    x = jnp.asarray([-50.0, -1.0, 0.0, 0.5, 200.0])
    np.testing.assert_allclose(r2d2.unscale(config, r2d2.rescale(config, x)), x, rtol=1e-3)
    plain = _config(value_rescaling=False)
    np.testing.assert_allclose(r2d2.rescale(plain, x), x)


def test_n_step_targets_stop_at_a_termination_and_bootstrap_a_truncation():
    """n = 2, gamma = 0.5, rewards 1..4, the episode ends after step 1; bootstrap
    values 10, 20, 30, 40 (no rescaling)."""
    config = _config(n_step=2, discount=0.5, value_rescaling=False)
    bootstrap = jnp.asarray([10.0, 20.0, 30.0, 40.0])
    terminated = _sequence([1, 2, 3, 4], [1, 0, 1, 1], [0, 1, 0, 0])
    # t=0: 1 + 0.5 x 2, no bootstrap; t=1: 2, no bootstrap; t=2: 3 + 0.5 x 4 + 0.25 x 40
    np.testing.assert_allclose(r2d2.n_step_targets(config, terminated, bootstrap), [2, 2, 15])
    truncated = _sequence([1, 2, 3, 4], [1, 1, 1, 1], [0, 1, 0, 0])
    # t=0: 2 + 0.25 x 20 (step 1's next observation); t=1: 2 + 0.5 x 20
    np.testing.assert_allclose(r2d2.n_step_targets(config, truncated, bootstrap), [7, 12, 15])
    rescaled = _config(n_step=2, discount=0.5)
    y = r2d2.n_step_targets(rescaled, truncated, r2d2.rescale(rescaled, bootstrap))
    np.testing.assert_allclose(y[1], np.sqrt(13.0) - 1 + 1e-3 * 12, rtol=1e-5)  # h(12)


def test_priority_mixes_max_and_mean():
    assert float(r2d2.priorities(jnp.asarray([1.0, 2.0, 3.0, 6.0]), 0.9)) == pytest.approx(5.7)


class _Counting(NamedTuple):
    """A scripted recurrent Q network: h <- h + obs, Q = w x (h, 2h)."""

    def apply(self, params, obs, state):
        h = state[0] + obs  # [1, 1]
        return params["w"] * jnp.concatenate([h, 2 * h], axis=-1), (h,)


def _scripted_td(lasts):
    """L = 3 from a stored state of 10, burn-in 1, n = 1, gamma 0.5; observations 1, 2,
    3 (next 2, 3, 4), actions 0, 0, 1, rewards 0, 1, 0."""
    config = _config(burn_in=1, n_step=1, discount=0.5, value_rescaling=False)
    seq = _sequence([0, 1, 0], [1, 1, 1], lasts, [0, 0, 1], [1, 2, 3], [2, 3, 4])
    params = {"w": jnp.float32(1.0)}
    start = (jnp.asarray([10.0]),)
    return r2d2.sequence_td(_Counting(), config, params, params, seq, start), config, seq


def test_sequence_td_burns_in_then_takes_double_q_targets():
    """Burn-in: h = 11. Step 1: h = 13, Q (13, 26), a = 0; its next obs from h = 13: Q
    (16, 32), online argmax 1, target 32: y = 1 + 0.5 x 32 = 17, td 4. Step 2: h = 16,
    Q (16, 32), a = 1; next: (20, 40): y = 0.5 x 40 = 20, td -12."""
    (td, taken), _, _ = _scripted_td([0, 0, 0])
    np.testing.assert_allclose(taken, [13, 32])
    np.testing.assert_allclose(td, [4, -12])


def test_sequence_td_resets_the_state_after_an_episode_end():
    """Step 1 ends a truncated episode: its target still bootstraps from h = 13 (y 17),
    and step 2 starts from 0: h = 3, Q (3, 6), a = 1; next (7, 14): y = 7, td 1."""
    (td, taken), _, _ = _scripted_td([0, 1, 0])
    np.testing.assert_allclose(taken, [13, 6])
    np.testing.assert_allclose(td, [4, 1])


def test_loss_and_priorities_of_a_batch():
    (td, _), config, seq = _scripted_td([0, 0, 0])
    batch = CoreChunk(
        jax.tree.map(lambda x: np.asarray(x)[:, None], seq), (np.full((1, 1, 1), 10.0),)
    )
    params = {"w": jnp.float32(1.0)}
    loss, metrics = r2d2.loss_fn(_Counting(), config, params, params, batch)
    assert float(loss) == pytest.approx(0.5 * (16 + 144) / 2)  # mean 0.5 td^2
    np.testing.assert_allclose(metrics["priorities"], [0.9 * 12 + 0.1 * 8])
    weighted, _ = r2d2.loss_fn(_Counting(), config, params, params, batch, jnp.asarray([0.5]))
    assert float(weighted) == pytest.approx(20.0)


def test_burn_in_only_warms_the_state():
    """The loss and gradient with a burn-in of 3 equal those of the rest of the sequence
    from the state the burn-in reached (the online and target params equal): the burn-in
    steps add no loss and no gradient."""
    spec = agents.EnvSpec(obs_size=3, num_actions=2)
    config = _config(burn_in=3, n_step=2, core_size=8, hidden_sizes=(8,))
    agent = agents.make_agent(config, spec)
    params = agent.init(jax.random.PRNGKey(0)).params
    rng = np.random.default_rng(0)
    length, n = 9, 4
    obs = rng.normal(size=(length, n, 3)).astype(np.float32)
    chunk = Transition(
        obs,
        rng.integers(0, 2, (length, n)).astype(np.int32),
        rng.normal(size=(length, n)).astype(np.float32),
        np.ones((length, n), np.float32),
        rng.random((length, n)) < 0.2,
        np.roll(obs, -1, axis=0),
        {},
    )
    start = (rng.normal(size=(1, n, 8)).astype(np.float32),)

    def grad_of(cfg, batch):
        fn = lambda p: r2d2.loss_fn(agent.network, cfg, p, params, batch)  # noqa: E731
        return jax.value_and_grad(fn, has_aux=True)(params)

    (loss, _), grads = grad_of(config, CoreChunk(chunk, start))

    def step(o, s):
        return agent.network.apply(params, o, s)

    head = jax.tree.map(lambda x: x[:3], chunk)
    warmed = recurrent.warm(step, (start[0][0],), head.observation, head.last)
    rest = CoreChunk(jax.tree.map(lambda x: x[3:], chunk), (warmed[0][None],))
    (loss_rest, _), grads_rest = grad_of(
        _config(burn_in=0, n_step=2, core_size=8, hidden_sizes=(8,)), rest
    )
    assert float(loss) == pytest.approx(float(loss_rest), rel=1e-5)
    for a, b in zip(jax.tree.leaves(grads), jax.tree.leaves(grads_rest)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


def _constant_batch(n: int, length: int = 8) -> CoreChunk:
    """N sequences of `length` steps: observations of ones, action 0, reward 1, no end,
    zero core state [1, N, 8]."""
    chunk = Transition(
        jnp.ones((length, n, 3)),
        jnp.zeros((length, n), jnp.int32),
        jnp.ones((length, n)),
        jnp.ones((length, n)),
        jnp.zeros((length, n), bool),
        jnp.ones((length, n, 3)),
        {},
    )
    return CoreChunk(chunk, (jnp.zeros((1, n, 8)),))


def test_update_refreshes_the_target_and_returns_sequence_priorities():
    spec = agents.EnvSpec(obs_size=3, num_actions=2)
    agent = agents.make_agent(
        _config(burn_in=2, n_step=2, core_size=8, target_update_period=2), spec
    )
    state = agent.init(jax.random.PRNGKey(1))
    n = 5
    batch = _constant_batch(n)
    state, metrics = agent.update(state, batch)
    assert metrics["priorities"].shape == (n,) and np.all(np.isfinite(metrics["loss"]))
    same = jax.tree.map(np.array_equal, state.params, state.target_params)
    assert not all(jax.tree.leaves(same))  # step 1: not yet refreshed
    state, _ = agent.update(state, batch)
    assert all(jax.tree.leaves(jax.tree.map(np.array_equal, state.params, state.target_params)))


def test_the_update_has_no_gather_or_scatter():
    """The taken and bootstrap actions are selected by one-hot products (as DQN's), so
    the lowered update holds no gather or scatter for a TPU to run per element."""
    spec = agents.EnvSpec(obs_size=3, num_actions=2)
    agent = agents.make_agent(_config(burn_in=2, n_step=2, core_size=8), spec)
    state = agent.init(jax.random.PRNGKey(1))
    n = 5
    batch = _constant_batch(n)
    text = agent.update.lower(state, batch, jnp.ones(n)).as_text()
    assert "stablehlo.gather" not in text and "stablehlo.scatter" not in text
