"""Exact answers by dynamic programming: hand-derived values and Monte-Carlo agreement."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from distrl.acting import evaluation
from distrl.envs import exact, make_env

LEFT, DOWN, RIGHT, UP = 0, 1, 2, 3
# The deterministic 4x4 route S -> 1 -> 2 -> 6 -> 10 -> 14 -> G: 6 steps.
ROUTE = np.zeros(16, np.int64)
ROUTE[[0, 1, 14]] = RIGHT
ROUTE[[2, 6, 10]] = DOWN


def test_deterministic_4x4_optimum_is_six_steps():
    env, gamma = make_env("4x4"), 0.9
    best = exact.optimum(env, gamma)
    s = env.start_cell
    assert best.success[s] == 1.0 and best.max_success[s] == 1.0
    assert best.horizon_success[s] == 1.0
    assert best.horizon_value[s] == pytest.approx(gamma**5, abs=1e-12)
    # Six steps, the last one onto G: gamma^5 * goal reward.
    assert best.value[s] == pytest.approx(gamma**5 * 1.0, abs=1e-12)
    mine = exact.evaluate_policy(env, ROUTE, gamma)
    assert mine.success[s] == 1.0 and mine.value[s] == pytest.approx(gamma**5)


def test_time_limit_cuts_the_route():
    gamma = 0.9
    short = exact.optimum(make_env("4x4", time_limit=5), gamma)
    assert short.success[0] == 0.0 and short.max_success[0] == 0.0 and short.value[0] == 0.0
    assert short.horizon_success[0] == 0.0
    just = exact.optimum(make_env("4x4", time_limit=6), gamma)
    assert just.success[0] == 1.0 and just.value[0] == pytest.approx(gamma**5)


def test_policy_into_a_hole_and_against_the_wall():
    env = make_env("4x4")
    down = exact.evaluate_policy(env, np.full(16, DOWN), 0.9)  # S -> 4 -> 8 -> 12 = H
    assert down.success[0] == 0.0 and down.value[0] == pytest.approx(-(0.9**2))
    left = exact.evaluate_policy(env, np.full(16, LEFT), 0.9)  # the wall until the limit
    assert left.success[0] == 0.0 and left.value[0] == 0.0


# A tiny slippery map, by hand. S=0 G=1 / H=2 F=3. From S each action slips to one of
# three directions: UP -> {RIGHT: G, UP: stay, LEFT: stay}; RIGHT -> {DOWN: H, RIGHT: G,
# UP: stay}; LEFT -> {UP: stay, LEFT: stay, DOWN: H}. UP is safe: with k steps left
# success_k = 1 - (2/3)^k, value_k = (1/3) sum_{t<k} (2 gamma / 3)^t. RIGHT always:
# success_k = 1/3 + success_{k-1}/3, value_k = 1/3 - 1/3 + (gamma/3) value_{k-1} = 0.
TINY = ("SG", "HF")


@pytest.mark.parametrize("limit", [1, 3, 7])
def test_tiny_slippery_map_by_hand(limit):
    env, gamma = make_env(TINY, slippery=True, time_limit=limit), 0.9
    best = exact.optimum(env, gamma)
    safe_success = 1 - (2 / 3) ** limit
    safe_value = sum((2 * gamma / 3) ** t for t in range(limit)) / 3
    assert best.success[0] == pytest.approx(safe_success, abs=1e-12)
    assert best.max_success[0] == pytest.approx(safe_success, abs=1e-12)
    assert best.value[0] == pytest.approx(safe_value, abs=1e-12)
    assert best.horizon_success[0] == pytest.approx(safe_success, abs=1e-12)
    assert best.horizon_value[0] == pytest.approx(safe_value, abs=1e-12)
    assert best.policy[0] == UP
    risky = exact.evaluate_policy(env, [RIGHT, 0, 0, 0], gamma)
    risky_success = 0.0
    for _ in range(limit):
        risky_success = 1 / 3 + risky_success / 3
    assert risky.success[0] == pytest.approx(risky_success, abs=1e-12)
    assert risky.value[0] == pytest.approx(0.0, abs=1e-12)
    a = exact.answer(env, [RIGHT, 0, 0, 0], gamma)
    assert a.ratio == pytest.approx(risky_success / safe_success)
    assert "exact success" in a.describe() and "optimal" in a.describe()


def test_slippery_8x8_discount_trades_success_for_speed():
    """The issue's figures: pi* succeeds 0.890 with gamma 0.99, 0.876 with gamma 0.9."""
    env = make_env("8x8", slippery=True)
    s = env.start_cell
    far = exact.optimum(env, 0.99)
    near = exact.optimum(env, 0.9)
    assert far.success[s] == pytest.approx(0.890, abs=0.0015)
    assert near.success[s] == pytest.approx(0.876, abs=0.0015)
    # Knowing the steps left helps; no policy beats max_success.
    assert far.max_success[s] >= far.horizon_success[s] > far.success[s] > near.success[s]
    assert far.horizon_value[s] >= far.value[s]
    # pi* beats any other stationary policy, e.g. gamma 0.9's, in gamma 0.99's value.
    other = exact.evaluate_policy(env, near.policy, 0.99)
    assert other.value[s] < far.value[s]


def _table_act(actions):
    table = jnp.asarray(actions, jnp.int32)
    return lambda params, key, obs, epsilon: table[jnp.argmax(obs, -1)]


@pytest.mark.parametrize("map_name", ["4x4", "8x8"])
def test_exact_agrees_with_monte_carlo(map_name):
    """20,000 episodes of the jitted env: success and return within 5 standard errors."""
    env = make_env(map_name, slippery=True)
    actions = exact.optimum(env, 0.99).policy
    mine = exact.evaluate_policy(env, actions, 1.0)  # gamma 1: the mean return
    n = 20_000
    run = jax.jit(lambda key: evaluation.run_episodes(env, _table_act(actions), None, key, n))
    mc = jax.device_get(run(jax.random.PRNGKey(3)))
    p = mine.success[env.start_cell]
    assert 0.3 < p < 1.0
    assert abs(mc.success_rate - p) < 5 * np.sqrt(p * (1 - p) / n)
    # Returns lie in [-1, 1]: their standard deviation is at most 1.
    assert abs(mc.mean_return - mine.value[env.start_cell]) < 5 / np.sqrt(n)


@pytest.mark.parametrize("map_name", ["4x4", "8x8"])
def test_jax_policy_stats_match_numpy(map_name):
    env = make_env(map_name, slippery=True)
    actions = exact.optimum(env, 0.99).policy
    success, mean_return, length = jax.jit(exact.make_policy_stats(env))(jnp.asarray(actions))
    mine = exact.evaluate_policy(env, actions, 1.0)
    assert float(success) == pytest.approx(mine.success[env.start_cell], abs=1e-5)
    assert float(mean_return) == pytest.approx(mine.value[env.start_cell], abs=1e-5)
    n = 20_000
    act = _table_act(actions)
    run = jax.jit(lambda key: evaluation.run_episodes(env, act, None, key, n))
    mc = jax.device_get(run(jax.random.PRNGKey(5)))
    assert abs(mc.mean_length - float(length)) < 0.03 * float(length)
    det = make_env(map_name)  # deterministic: the route's length exactly
    stats = exact.make_policy_stats(det)(jnp.asarray(exact.optimum(det, 0.9).policy))
    assert float(stats[0]) == 1.0 and float(stats[2]) == (6.0 if map_name == "4x4" else 14.0)


# -- stochastic policies: the value a critic estimates -------------------------------


@pytest.mark.parametrize("limit", [1, 4, 9])
def test_tiny_slippery_map_stochastic_policy_by_hand(limit):
    """TINY from S under UP or RIGHT, 1/2 each: UP reaches G with 1/3 and stays with 2/3;
    RIGHT reaches G, H or stays with 1/3 each. So P(G) = 1/3, P(H) = 1/6, P(stay) = 1/2:
    success_k = (1/3) sum_{t<k} (1/2)^t, value_k = (1/3 - 1/6) sum_{t<k} (gamma/2)^t."""
    env, gamma = make_env(TINY, slippery=True, time_limit=limit), 0.9
    probs = np.full((4, 4), 0.25)
    probs[0] = [0.0, 0.0, 0.5, 0.5]  # LEFT DOWN RIGHT UP
    mine = exact.evaluate_stochastic_policy(env, probs, gamma)
    success = sum(0.5**t for t in range(limit)) / 3
    value = sum((gamma / 2) ** t for t in range(limit)) / 6
    assert mine.success[0] == pytest.approx(success, abs=1e-12)
    assert mine.value[0] == pytest.approx(value, abs=1e-12)
    assert mine.value[1] == mine.value[2] == 0.0  # G and H end the episode


def _old_evaluate_policy(env, actions, discount):
    """The deterministic evaluation as it was before it became the one-hot case."""
    d = exact.dynamics(env)
    cells = np.arange(env.num_cells)
    value, success = np.zeros(env.num_cells), np.zeros(env.num_cells)
    for _ in range(env.time_limit):
        q_value, q_success = exact._backup(d, discount, value, success)
        value, success = q_value[cells, actions], q_success[cells, actions]
        value[d.terminal], success[d.terminal] = 0.0, 0.0
    return value, success


@pytest.mark.parametrize("map_name,slippery", [("4x4", False), ("8x8", True)])
def test_one_hot_distribution_is_the_deterministic_policy(map_name, slippery):
    """The greedy case: one-hot probabilities give the deterministic evaluation, to the bit."""
    env = make_env(map_name, slippery=slippery)
    rng = np.random.default_rng(0)
    for actions in (exact.optimum(env, 0.99).policy, rng.integers(0, 4, env.num_cells)):
        value, success = _old_evaluate_policy(env, actions, 0.99)
        mine = exact.evaluate_stochastic_policy(env, np.eye(4)[actions], 0.99)
        np.testing.assert_array_equal(mine.value, value)
        np.testing.assert_array_equal(mine.success, success)
        np.testing.assert_array_equal(exact.evaluate_policy(env, actions, 0.99).value, value)


def test_stochastic_policy_refuses_what_is_no_distribution():
    env = make_env("4x4")
    for probs in (np.full((16, 4), 0.3), -np.eye(4)[np.zeros(16, int)], np.full((15, 4), 0.25)):
        with pytest.raises(ValueError):
            exact.evaluate_stochastic_policy(env, probs, 0.9)


def _sampled_act(probs):
    """act(params, key, obs, epsilon): an action drawn from probs [S, A] in the obs's cell."""
    logits = jnp.log(jnp.asarray(probs, jnp.float32))
    return lambda params, key, obs, epsilon: jax.random.categorical(key, obs @ logits)


@pytest.mark.parametrize("slippery", [False, True])
def test_stochastic_policy_agrees_with_sampled_episodes(slippery):
    """20,000 episodes drawing each action from the distribution: success and mean return
    (gamma 1) within 5 standard errors of the exact figures."""
    env = make_env("4x4", slippery=slippery)
    best = np.eye(4)[exact.optimum(env, 0.99).policy]
    probs = 0.7 * best + 0.075  # a soft pi*: the kind of policy PPO samples from
    mine = exact.evaluate_stochastic_policy(env, probs, 1.0)
    n = 20_000
    run = jax.jit(lambda key: evaluation.run_episodes(env, _sampled_act(probs), None, key, n))
    mc = jax.device_get(run(jax.random.PRNGKey(11)))
    p = mine.success[env.start_cell]
    assert 0.1 < p < 0.9  # neither certain nor hopeless: the test can tell
    assert abs(mc.success_rate - p) < 5 * np.sqrt(p * (1 - p) / n)
    assert abs(mc.mean_return - mine.value[env.start_cell]) < 5 / np.sqrt(n)
