"""Evaluation: scripted episodes with known outcomes, value and arrow grid rendering."""

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from distrl import agents
from distrl.acting import evaluation, exact_check, host_evaluation, intervals, reporting
from distrl.agents.base import Agent, ValuedPolicy
from distrl.analysis import plots
from distrl.envs import exact, make_env
from distrl.pyenv import EnvError
from tests import user_envs

ENV = make_env("4x4")
ROUTE = np.zeros(16, np.int32)  # 0 -> 1 -> 2 -> 6 -> 10 -> 14 -> 15
ROUTE[[0, 1, 14]] = 2
ROUTE[[2, 6, 10]] = 1


def table_agent(action_table):
    """An Agent whose greedy action and value are looked up per cell."""
    table = jnp.asarray(action_table)

    def greedy(params, obs):
        return table[jnp.argmax(obs, -1)]

    def value(params, obs):
        return jnp.argmax(obs, -1) / 10.0

    def policy(params, key, obs, epsilon):
        return greedy(params, obs), {}

    return Agent(None, None, policy, greedy, value, None, None, None)


def evaluate(action_table, num_envs=3):
    evaluate_fn = evaluation.make_evaluator(ENV, table_agent(action_table), num_envs)
    return jax.device_get(evaluate_fn(None, jax.random.PRNGKey(0)))


def test_episodes_known_outcomes():
    result = evaluate(ROUTE)
    assert (result.success_rate, result.mean_return, result.mean_length) == (1.0, 1.0, 6.0)
    down = np.full(16, 1, np.int32)  # S -> 4 -> 8 -> 12 (H)
    assert tuple(evaluate(down))[:3] == (0.0, -1.0, 3.0)
    left = np.zeros(16, np.int32)  # bumps the wall until the time limit
    assert tuple(evaluate(left, num_envs=2))[:3] == (0.0, 0.0, 100.0)


def test_render_tiny_grid():
    desc = ("SF", "HG")
    values = np.array([[0.5, -0.25], [9.0, 9.0]])
    assert reporting.render_values(values, desc) == "+0.50  -0.25\n    H      G"
    actions = np.array([[2, 1], [0, 0]])
    assert reporting.render_arrows(actions, desc) == ">   v\nH   G"


def test_render_arrows_as_the_series_printed():
    series = ">   >   v   v\n^   H   v   H\n^   >   v   H\nH   >   >   G"
    codes = {"<": 0, "v": 1, ">": 2, "^": 3, "H": 0, "G": 0}
    actions = np.array([[codes[c] for c in line.split()] for line in series.splitlines()])
    assert reporting.render_arrows(actions, ENV.desc) == series


def test_value_grid_and_report():
    values, actions = reporting.value_grid(ENV, table_agent(ROUTE), None)
    np.testing.assert_allclose(values, np.arange(16).reshape(4, 4) / 10.0, rtol=1e-6)
    np.testing.assert_array_equal(actions, ROUTE.reshape(4, 4))
    text = reporting.report(ENV, table_agent(ROUTE), None)
    assert text.splitlines()[1] == "+0.00  +0.10  +0.20  +0.30"
    assert text.splitlines()[-1] == "H   <   >   G"  # cell 13 is off the route: LEFT


def test_value_grid_of_a_tabular_dqn():
    agent = agents.make_agent(agents.make_config("tabular"), ENV)
    table = jnp.arange(64, dtype=jnp.float32).reshape(16, 4)[:, ::-1]  # max in column 0
    values, actions = reporting.value_grid(ENV, agent, {"table": {"w": table}})
    np.testing.assert_allclose(values.reshape(-1), np.arange(16) * 4 + 3)
    np.testing.assert_array_equal(actions, 0)


# -- success intervals and the stop rule -------------------------------------------


def _wilson_by_hand(k, n, z=1.96):
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return centre - half, centre + half


def test_wilson_interval_known_values():
    # 64 of 64: the lower bound is n / (n + z^2); 0 of n mirrors it.
    low, high = intervals.wilson_interval(64, 64)
    assert float(low) == pytest.approx(64 / (64 + 1.96**2), abs=1e-6) and float(high) == 1.0
    low, high = intervals.wilson_interval(0, 64)
    assert float(low) == 0.0 and float(high) == pytest.approx(1.96**2 / (64 + 1.96**2), abs=1e-6)
    for k, n in [(874, 1000), (3, 10), (8900, 10000)]:
        low, high = intervals.wilson_interval(k, n)
        want = _wilson_by_hand(k, n)
        assert (float(low), float(high)) == pytest.approx(want, abs=1e-5)
        assert float(low) < k / n < float(high)
    # Tighter with more episodes: 10,000 episodes pin 0.89 to about +-0.006.
    low, high = intervals.wilson_interval(8900, 10000)
    assert float(high) - float(low) < 0.013


def test_wilson_interval_covers_the_truth():
    """95% intervals from 2,000 binomial draws cover p about 95% of the time."""
    rng = np.random.default_rng(0)
    for p, n in [(0.74, 100), (0.89, 1000), (0.98, 64)]:
        k = rng.binomial(n, p, size=2000)
        low, high = intervals.wilson_interval(jnp.asarray(k), n)
        coverage = np.mean((np.asarray(low) <= p) & (p <= np.asarray(high)))
        assert 0.92 < coverage < 0.985, (p, n, coverage)


def test_deterministic_map_one_episode_is_exact():
    result = evaluate(ROUTE, num_envs=64)
    assert int(result.episodes) == 1  # every episode would be this one
    assert result.success_low == result.success_high == result.success_rate == 1.0
    assert intervals.confirmed(result, 1.0)
    slippery = make_env("4x4", slippery=True)
    assert not evaluation.is_deterministic(slippery)
    assert evaluation.episodes_needed(slippery, 64) == 64
    assert evaluation.episodes_needed(ENV, 64, greedy=False) == 64


def test_stop_rule_ignores_a_lucky_small_sample():
    """Slippery 4x4's optimal policy succeeds with exactly 0.740. Among many 8-episode
    evaluations some reach 1.0, but the stop rule (lower bound >= target 0.9) never
    fires on them, nor on 10,000 episodes of the same policy."""
    from distrl.envs import exact
    from distrl.nodes import evaluator as evaluator_node

    env = make_env("4x4", slippery=True)
    best = exact.optimum(env, 0.99)
    assert best.success[0] == pytest.approx(0.740, abs=1e-3)
    agent = table_agent(best.policy)
    small = jax.jit(jax.vmap(evaluation.make_evaluator(env, agent, 8), in_axes=(None, 0)))
    reports = jax.device_get(small(None, jax.random.split(jax.random.PRNGKey(0), 200)))
    lucky = reports.success_rate >= 0.9
    assert lucky.sum() >= 5  # 0.740^8 + 8 * 0.740^7 * 0.26 ~ 0.24 of them
    assert not np.any(reports.success_low[lucky] >= 0.9)
    config = ml_collections.ConfigDict(
        dict(
            evaluator=dict(target_success=0.9, target_return=0.0, confirm_envs=10_000),
            budget=dict(env_steps=0, learner_steps=0, seconds=0),
        )
    )
    one = jax.tree.map(lambda x: x[np.flatnonzero(lucky)[0]], reports)
    assert one.success_rate >= 0.9
    assert evaluator_node.stop_reason(config, one, {}, 0.0) is None
    evaluate = evaluation.make_evaluator(env, agent, 10_000)
    large = jax.device_get(evaluate(None, jax.random.PRNGKey(1)))
    assert abs(large.success_rate - 0.740) < 0.015 and large.success_high < 0.76
    assert evaluator_node.stop_reason(config, large, {}, 0.0) is None
    assert evaluator_node.stop_reason(config, large, {}, 0.0, target=0.7) == "target_reached"


def test_a_small_evaluation_never_stops_a_run_even_when_its_bound_clears():
    """95 of 100 episodes: Wilson's lower bound 0.888 clears a 0.872 target, but a
    trainer that evaluates hundreds of times sees such a sample by chance (seen: a
    policy of exact success 0.848 stopped a run). Only confirm_envs episodes count."""
    from distrl.nodes import evaluator as evaluator_node

    low, high = intervals.wilson_interval(95, 100)
    small = intervals.EvalResult(0.95, 0.9, 20.0, 100.0, float(low), float(high))
    assert small.success_low >= 0.872
    assert not intervals.confirmed(small, 0.872, min_episodes=10_000)
    assert intervals.touches(small, 0.872, 10_000)
    config = ml_collections.ConfigDict(
        dict(
            evaluator=dict(target_success=0.872, target_return=0.0, confirm_envs=10_000),
            budget=dict(env_steps=0, learner_steps=0, seconds=0),
        )
    )
    assert evaluator_node.stop_reason(config, small, {}, 0.0) is None
    low, high = intervals.wilson_interval(8850, 10_000)
    large = intervals.EvalResult(0.885, 0.8, 30.0, 10_000.0, float(low), float(high))
    assert evaluator_node.stop_reason(config, large, {}, 0.0) == "target_reached"


def test_keep_best_picks_the_confirmed_evaluation_with_the_best_lower_bound():
    from distrl.nodes.evaluator import better_report

    def result(k, n):
        low, high = intervals.wilson_interval(k, n)
        return intervals.EvalResult(k / n, 0.0, 0.0, float(n), float(low), float(high))

    good, final = (result(8760, 10_000), "good", 3), (result(8640, 10_000), "final", 9)
    lucky_small = (result(99, 100), "lucky", 5)  # too few episodes to count
    best = None
    for candidate in (good, lucky_small, final):
        best = better_report(best, candidate, 10_000)
    assert best[1:] == ("good", 3)
    assert better_report(None, lucky_small, 10_000) is None
    assert better_report(good, (result(8760, 10_000), "later", 12), 10_000)[1] == "later"


def test_a_budget_or_a_stop_reports_the_kept_best_and_a_target_its_own_params():
    from distrl.nodes.evaluator import reported_at_end

    def result(k, n):
        low, high = intervals.wilson_interval(k, n)
        return intervals.EvalResult(k / n, 0.0, 0.0, float(n), float(low), float(high))

    best, last = (result(10_000, 10_000), "perfect", 7), (result(0, 10_000), "last", 8)
    keep = ml_collections.ConfigDict(dict(keep_best=True, confirm_envs=10_000))
    for reason in ("env_step_budget", "learner_step_budget", "time_budget", "stopped"):
        assert reported_at_end(reason, best, last, keep)[1:] == ("perfect", 7), reason
    assert reported_at_end("target_reached", best, last, keep)[1:] == ("last", 8)
    assert reported_at_end("stopped", None, last, keep)[1:] == ("last", 8)  # none confirmed
    no_keep = ml_collections.ConfigDict(dict(keep_best=False, confirm_envs=10_000))
    assert reported_at_end("stopped", best, last, no_keep)[1:] == ("last", 8)


def test_env_step_cadence_marks_skip_what_an_evaluation_overran():
    from distrl.nodes.evaluator import next_mark

    assert next_mark(0, 100_000) == 100_000
    assert next_mark(99_999, 100_000) == 100_000
    assert next_mark(100_000, 100_000) == 200_000  # a count on the mark waits for the next
    assert next_mark(351_000, 100_000) == 400_000  # marks passed meanwhile are not caught up


# -- the learned value checked against the exact value of the policy it estimates ----


def _cell_table(values):
    table = jnp.asarray(values, jnp.float32)
    return lambda params, obs: table[jnp.argmax(obs, -1)]


def critic_agent(probs, values):
    """An Agent that samples from probs [S, A] and whose critic says values [S]."""
    sample = _cell_table(probs)

    def greedy(params, obs):
        return jnp.argmax(sample(params, obs), -1)

    valued = ValuedPolicy("sampling", sample)
    return Agent(None, None, None, greedy, _cell_table(values), None, None, None, valued)


def test_a_right_critic_shows_as_right_and_a_wrong_one_as_wrong():
    probs = 0.8 * np.eye(4)[ROUTE] + 0.05  # a soft ROUTE, as PPO samples it
    truth = exact.evaluate_stochastic_policy(ENV, probs, 0.9).value
    greedy_value = exact.evaluate_policy(ENV, ROUTE, 0.9).value[0]  # 0.9^5
    assert truth[0] < greedy_value - 0.2  # the two policies' values differ a lot
    right = exact_check.exact_answer(ENV, critic_agent(probs, truth), None, 0.9)
    assert right["learned_policy"] == "sampling"
    assert right["value"] == pytest.approx(greedy_value)  # the greedy figures stay
    assert right["learned_value"] == pytest.approx(truth[0], abs=1e-6)
    assert right["learned_policy_value"] == pytest.approx(truth[0], abs=1e-6)  # float32 probs
    assert abs(right["learned_error"]) < 1e-6
    errors = np.array(right["value_errors"], float)  # None on H and G -> nan
    terminal = np.array([[ch in "HG" for ch in row] for row in ENV.desc])
    np.testing.assert_array_equal(np.isnan(errors), terminal)
    assert np.nanmax(np.abs(errors)) < 1e-6
    wrong_values = truth.copy()
    wrong_values[[0, 6]] += [0.3, -0.2]
    wrong = exact_check.exact_answer(ENV, critic_agent(probs, wrong_values), None, 0.9)
    assert wrong["learned_error"] == pytest.approx(0.3, abs=1e-6)
    errors = np.nan_to_num(np.array(wrong["value_errors"], float)).reshape(-1)
    np.testing.assert_allclose(errors, np.eye(16)[0] * 0.3 - np.eye(16)[6] * 0.2, atol=1e-6)
    text = reporting.describe_exact(wrong)
    assert f"V(S) learned {truth[0] + 0.3:+.3f}, exact V^pi(S) {truth[0]:+.3f}" in text
    assert "(sampling policy): error +0.300" in text
    assert f"greedy policy V(S) {greedy_value:+.3f}" in text
    grid = reporting.report(
        ENV, grids=reporting.value_grid(ENV, critic_agent(probs, truth), None), answer=wrong
    )
    heading = "value error, learned - exact V^pi (sampling policy):"
    assert grid.splitlines()[-5] == heading
    assert grid.splitlines()[-4] == "+0.30  +0.00  +0.00  +0.00"
    assert grid.splitlines()[-3] == "+0.00      H  -0.20      H"


def test_dqn_value_is_checked_against_its_greedy_policy():
    """A tabular Q whose max is the greedy policy's exact value everywhere: error 0."""
    agent = agents.make_agent(agents.make_config("tabular"), ENV)
    truth = exact.evaluate_policy(ENV, ROUTE, 0.9).value
    table = np.full((16, 4), -1.0)
    table[np.arange(16), ROUTE] = truth
    answer = exact_check.exact_answer(ENV, agent, {"table": {"w": jnp.asarray(table)}}, 0.9)
    assert answer["learned_policy"] == "greedy"
    assert answer["learned_policy_value"] == answer["value"] == pytest.approx(0.9**5)
    assert abs(answer["learned_error"]) < 1e-6
    assert np.nanmax(np.abs(np.array(answer["value_errors"], float))) < 1e-6
    assert "(greedy policy): error" in reporting.describe_exact(answer)


def test_ppo_value_is_checked_against_its_sampling_policy():
    agent = agents.make_agent(agents.make_config("ppo"), ENV)
    params = agent.init(jax.random.PRNGKey(0)).params
    answer = exact_check.exact_answer(ENV, agent, params, 0.9)
    obs = jnp.eye(16)
    logits, values = agent.network.apply(params, obs)
    probs = np.asarray(jax.nn.softmax(logits), np.float64)
    truth = exact.evaluate_stochastic_policy(ENV, probs, 0.9).value
    assert answer["learned_policy"] == "sampling"
    assert answer["learned_policy_value"] == pytest.approx(truth[0], abs=1e-6)
    assert answer["learned_value"] == pytest.approx(float(values[0]), abs=1e-6)
    errors = np.array(answer["value_errors"], float).reshape(-1)
    live = ~np.isnan(errors)
    np.testing.assert_allclose(errors[live], (np.asarray(values) - truth)[live], atol=1e-6)
    assert "exact V^pi(S)" in reporting.describe_exact(answer)


@pytest.mark.parametrize("preset", ["reinforce", "grpo"])
def test_critic_free_agents_report_no_learned_value(preset):
    agent = agents.make_agent(agents.make_config(preset), ENV)
    params = agent.init(jax.random.PRNGKey(0)).params
    answer = exact_check.exact_answer(ENV, agent, params, 0.9)
    for key in ("learned_value", "learned_policy", "learned_policy_value", "value_errors"):
        assert answer[key] is None
    assert "none learned (no critic)" in reporting.describe_exact(answer)
    grid = reporting.report(ENV, agent, params, answer=answer)
    assert grid.startswith("values (no critic") and "value error" not in grid


def test_policy_plot_draws_the_value_error_panel(tmp_path):
    probs = 0.8 * np.eye(4)[ROUTE] + 0.05
    truth = exact.evaluate_stochastic_policy(ENV, probs, 0.9).value
    agent = critic_agent(probs, truth + 0.1)
    values, actions = reporting.value_grid(ENV, agent, None)
    result = dict(
        map=list(ENV.desc),
        values=values.tolist(),
        actions=actions.tolist(),
        exact=exact_check.exact_answer(ENV, agent, None, 0.9),
        evaluation=dict(success_rate=1.0),
    )
    both = plots.plot_policy(result, str(tmp_path / "both.png"))
    result["exact"] = dict(result["exact"], value_errors=None, learned_policy=None)
    one = plots.plot_policy(result, str(tmp_path / "one.png"))
    import matplotlib.image  # noqa: PLC0415 - only this test reads a PNG back

    (h2, w2), (h1, w1) = (matplotlib.image.imread(p).shape[:2] for p in (both, one))
    assert h2 == h1 and w2 > 1.7 * w1  # the error panel beside the values


def test_a_return_target_stops_on_the_return_interval_and_joins_a_success_target():
    """The mean return's 95% interval comes from the episodes; a return target counts on
    its lower bound, confirmed on confirm_envs episodes as success is; with a success
    target too, both must be reached; with neither, nothing stops."""
    returns = jnp.asarray(np.tile([3.0, 4.0], 500), jnp.float32)  # mean 3.5, sd 0.5
    low, high = intervals.mean_interval(returns)
    assert float(low) == pytest.approx(3.5 - 1.96 * 0.5 / np.sqrt(1000), abs=1e-3)
    assert float(high) == pytest.approx(3.5 + 1.96 * 0.5 / np.sqrt(1000), abs=1e-3)
    s_low, s_high = intervals.wilson_interval(950, 1000)
    large = intervals.EvalResult(0.95, 3.5, 4.0, 1000.0, s_low, s_high, low, high)
    assert intervals.confirmed(large, 0.0, 1000, target_return=3.4)
    assert not intervals.confirmed(large, 0.0, 1000, target_return=3.5)  # the bound, not the mean
    assert not intervals.confirmed(large, 0.0, 10_000, target_return=3.4)  # too few episodes
    assert intervals.touches(large, 0.0, 10_000, target_return=3.4)
    assert intervals.confirmed(large, 0.9, 1000, target_return=3.4)
    assert not intervals.confirmed(large, 0.95, 1000, target_return=3.4)  # success bound < 0.95
    assert not intervals.confirmed(large, 0.0, 0) and not intervals.touches(large, 0.0, 0)
    # Negative returns (costs) are targets too.
    costs = large._replace(mean_return=-80.0, return_low=-85.0, return_high=-75.0)
    assert intervals.confirmed(costs, 0.0, 1000, target_return=-100.0)


def test_a_log_is_split_where_an_older_resume_sent_counts_or_clock_back():
    """A resume now continues the counts and the clock (one curve); older versions
    restarted the clock at the checkpoint's, and older still the counts too."""
    now = dict(
        env_steps=np.array([10.0, 20.0, 30.0, 30.0, 40.0]),
        elapsed=np.array([1.0, 2.0, 3.0, 3.0, 4.0]),
    )
    assert [list(s) for s in plots.segments(now)] == [[0, 1, 2, 3, 4]]
    clock_back = dict(now, elapsed=np.array([1.0, 2.0, 3.0, 2.5, 3.5]))
    assert [list(s) for s in plots.segments(clock_back)] == [[0, 1, 2], [3, 4]]
    older = dict(env_steps=np.array([10.0, 20.0, 15.0]), elapsed=np.array([1.0, 2.0, 3.0]))
    assert [list(s) for s in plots.segments(older)] == [[0, 1], [2]]
    one = dict(env_steps=np.array([10.0, 20.0]), elapsed=np.array([1.0, 2.0]))
    assert [list(s) for s in plots.segments(one)] == [[0, 1]]


def nan_on_copy_1_from(step: int):
    """A Box agent acting 0.5, but NaN for copy 1 once its Clock env shows `step` (the
    greedy and the acting policy alike, as diverged params would)."""

    def greedy(params, obs):
        bad = (jnp.arange(obs.shape[0]) == 1)[:, None] & (obs >= step)
        return jnp.where(bad, jnp.nan, 0.5)

    def policy(params, key, obs, epsilon):
        return greedy(params, obs), {}

    return Agent(None, None, policy, greedy, None, None, None, None)


def test_a_nonfinite_action_in_an_evaluation_is_named_with_its_copy_and_step():
    """An evaluation acted NaN for copy 1 from the third step of its episode raises the
    actors' EnvError, not a NaN return: from the jitted evaluator given the env's name,
    and from the evaluator node's factory (`host_evaluation.make_evaluator`) for a JAX
    env. Without the name the evaluator stays traceable and its return is NaN; finite
    actions pass (5 steps of reward -0.25)."""
    name = "tests.user_envs:make_clock"
    env, key = user_envs.make_clock(5), jax.random.PRNGKey(0)
    bad = nan_on_copy_1_from(2)
    config = ml_collections.ConfigDict({"env": {"name": name}})
    for evaluate in (
        evaluation.make_evaluator(env, bad, 3, env_name=name),
        host_evaluation.make_evaluator(env, bad, 3, True, config),
    ):
        with pytest.raises(EnvError) as err:
            evaluate(None, key)
        assert str(err.value) == (
            f"env {name} (evaluation, copy 1) at step 3: the policy's action is not finite "
            f"(its params diverged)"
        )
    episodes = jax.jit(
        lambda k: evaluation.play_episodes(env, evaluation.make_act(bad), None, k, 3)
    )
    assert int(episodes(key).first_nonfinite_action) == 2 * 3 + 1  # t * B + b
    assert np.isnan(evaluation.make_evaluator(env, bad, 3)(None, key).mean_return)
    fine = evaluation.make_evaluator(env, nan_on_copy_1_from(99), 3, env_name=name)(None, key)
    assert float(fine.mean_return) == pytest.approx(-1.25)
