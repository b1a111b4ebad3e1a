"""Single-process trainer: replay buffer, and every algorithm solving the 4x4 map.

Each learning run is one fused, jitted call (a few seconds, mostly compilation):
greedy success rate 1.0 from S on the non-slippery 4x4 map, fixed seeds and budgets.
"""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import load_config

from distrl import config as config_lib
from distrl import evaluator_config, local
from distrl import experiment as experiment_lib
from distrl.agents import replay_buffer
from distrl.pyenv import EnvError
from distrl.types import QTransition


def items(values):
    v = jnp.asarray(values, jnp.float32)
    obs = jnp.stack([v, -v], axis=-1)
    return QTransition(obs, v.astype(jnp.int32), v, v, obs)


def test_replay_add_wraps_and_samples_filled_slots():
    buffer = replay_buffer.replay_init(jax.tree.map(lambda x: x[0], items([0.0])), 4)
    buffer = replay_buffer.replay_add(buffer, items([1, 2, 3]))
    assert int(buffer.size) == 3 and int(buffer.position) == 3
    np.testing.assert_array_equal(buffer.data.reward, [1, 2, 3, 0])
    buffer = replay_buffer.replay_add(buffer, items([4, 5]))  # overwrites the oldest
    assert int(buffer.size) == 4 and int(buffer.position) == 1
    np.testing.assert_array_equal(buffer.data.reward, [5, 2, 3, 4])
    np.testing.assert_array_equal(buffer.data.observation[:, 1], [-5, -2, -3, -4])
    sample = replay_buffer.replay_sample(buffer, jax.random.PRNGKey(0), 256)
    assert sample.observation.shape == (256, 2)
    assert set(np.asarray(sample.reward).tolist()) == {2.0, 3.0, 4.0, 5.0}
    np.testing.assert_array_equal(sample.observation[:, 0], sample.reward)  # rows stay whole


def test_sample_only_from_filled_slots():
    buffer = replay_buffer.replay_init(jax.tree.map(lambda x: x[0], items([0.0])), 100)
    buffer = replay_buffer.replay_add(buffer, items([7, 8]))
    sample = replay_buffer.replay_sample(buffer, jax.random.PRNGKey(1), 64)
    assert set(np.asarray(sample.reward).tolist()) == {7.0, 8.0}


def _config(algorithm: str, env_steps: int):
    """configs/<file>.py (configs/preset.py for presets without a file), with a budget."""
    files = {"tabular": "tabular_q", "grpo": None}
    name = files.get(algorithm, algorithm)
    config = load_config(name) if name else config_lib.base_config(algorithm)
    config.budget.update(dict(env_steps=env_steps, seconds=0.0))
    return config


@pytest.mark.parametrize(
    "algo, budget",
    [("dqn", 60_000), ("tabular", 30_000), ("a2c", 30_000), ("ppo", 30_000), ("grpo", 200_000)],
)
def test_solves_4x4(algo, budget):
    config = _config(algo, budget)
    result = local.train(config)
    assert result.solved, result
    assert result.success_rate == 1.0 and result.mean_length == 6.0
    steps_per_iteration = config.num_actors * config.actor.num_envs * config.actor.unroll_length
    assert 0 < result.env_steps <= budget + steps_per_iteration
    assert result.updates > 0 and result.episodes > 0
    assert result.report.splitlines()[-1].endswith("G")
    # The learned value is checked against the policy it is for (none without a critic).
    learned = {"dqn": "greedy", "tabular": "greedy", "a2c": "sampling", "ppo": "sampling"}
    answer = result.exact
    assert answer["learned_policy"] == learned.get(algo)
    if algo == "grpo":
        assert answer["learned_value"] is None and answer["value_errors"] is None
    else:
        error = answer["learned_value"] - answer["learned_policy_value"]
        assert answer["learned_error"] == pytest.approx(error)
        assert answer["value_errors"][0][0] == pytest.approx(error)  # S is the top-left cell
    if algo in ("dqn", "tabular"):  # Q-learning's max_a Q is the greedy policy's value
        assert answer["learned_policy_value"] == answer["value"]


def test_settings_map_the_experiment_config():
    config = load_config("dqn")  # 2 actors x 64 envs, T=16, batch 256, 4 samples per insert
    s = local.Settings.of(experiment_lib.make(config))
    assert (s.num_envs, s.rollout_length, s.batch_size) == (128, 16, 256)
    assert (s.replay_capacity, s.min_replay_size) == (64_000, 640)
    assert s.updates_per_iteration == 4 * 16 * 128 // 256
    assert (s.max_env_steps, s.target_success) == (2_000_000, evaluator_config.AUTO)  # 1.0 here
    assert (s.eval_envs, s.confirm_envs) == (config.evaluator.num_envs, 10_000)
    config.evaluator.target_success, config.budget.env_steps = 0.0, 0
    s = local.Settings.of(experiment_lib.make(config))
    assert (s.target_success, s.target_return) == (0.0, 0.0) and s.max_env_steps == 2**31 - 1
    ppo = load_config("ppo")  # batch_chunks=2, 2 actors: one update of [T, 128]
    assert local.Settings.of(experiment_lib.make(ppo)).updates_per_iteration == 1
    a2c = load_config("a2c")  # batch_chunks=1, 2 actors: two updates of [T, 64]
    assert local.Settings.of(experiment_lib.make(a2c)).updates_per_iteration == 2
    a2c.num_actors, a2c.learner.batch_chunks = 3, 2
    with pytest.raises(config_lib.ConfigError, match="num_actors=3 must be a multiple"):
        local.Settings.of(experiment_lib.make(a2c))
    a2c.num_actors, a2c.agent.learning_rate = 2, float("nan")
    with pytest.raises(config_lib.ConfigError, match="learning_rate=nan"):
        local.Settings.of(experiment_lib.make(a2c))


def test_evaluations_follow_the_evaluators_env_step_cadence_by_default():
    """local.eval_every 0 (auto): evaluator.every_env_steps in iterations of T x B, so
    both modes judge a preset as often in env steps; every iteration without one."""
    config = load_config("ppo_slippery8x8")  # every 100k env steps; [T, B] = [16, 32]
    assert config.local.eval_every == 0 and config.evaluator.every_env_steps == 100_000
    assert (
        local.Settings.of(experiment_lib.make(config)).eval_every
        == round(100_000 / (16 * 32))
        == 195
    )
    config.evaluator.every_env_steps = 100  # less than one iteration: every iteration
    assert local.Settings.of(experiment_lib.make(config)).eval_every == 1
    config.evaluator.every_env_steps = 0  # the evaluator judges on wall time
    assert local.Settings.of(experiment_lib.make(config)).eval_every == 1
    config.local.eval_every = 7  # set: as given
    assert local.Settings.of(experiment_lib.make(config)).eval_every == 7


def test_n_step_dqn_runs_and_counts_warmup():
    config = load_config("dqn")
    config.num_actors, config.actor.num_envs = 1, 16
    config.learner.batch_size, config.replay.min_size = 64, 256
    config.replay.samples_per_insert = 1.0  # 16 x 16 / 64 = 4 updates per iteration
    config.agent.n_step, config.agent.hidden_sizes = 3, (16,)
    config.budget.env_steps, config.evaluator.target_success = 2_000, 0.0  # never solved
    config.seed = 1
    result = local.train(config)
    assert not result.solved  # unreachable target: runs the whole budget
    # 2 warm-up steps of 16 envs, then chunks of 16 x 16 until the budget is passed.
    assert result.env_steps == 2 * 16 + 8 * 256
    assert result.updates == 8 * 4  # min replay (256) is reached in the first chunk


def test_deterministic_map_evaluates_one_exact_episode():
    result = local.train(_config("tabular", 30_000))
    assert result.solved and result.eval_episodes == 1
    assert result.success_low == result.success_high == 1.0
    assert result.exact["success"] == 1.0 and result.exact["ratio"] == 1.0
    assert result.exact["optimal_value"] == pytest.approx(0.9**5)  # 6 steps, discount 0.9


def test_sampled_evaluation_plays_the_sampled_policy():
    """evaluator.sampled: the sampled policy's episodes (as the distributed evaluator
    plays them), not the one exact episode of the greedy policy a deterministic map
    allows: the final figure is an interval over confirm_envs episodes, and no episode
    is shorter than the map's shortest path."""
    config = _config("ppo", 30_000)
    config.evaluator.sampled = True
    result = local.train(config)
    assert result.eval_episodes == config.evaluator.confirm_envs, result
    assert result.success_rate > 0.0 and result.success_low < result.success_high, result
    assert result.mean_length >= 6.0


def _slippery_tabular(env_steps: int):
    config = _config("tabular", env_steps)
    config.env.slippery, config.num_actors, config.actor.num_envs = True, 1, 16
    return config


def test_slippery_stop_rule_needs_the_lower_bound():
    """Slippery 4x4: no policy reaches 0.9 (the best is 0.744). 8-episode evaluations
    of near-optimal policies often show 1.0, but only a confirm_envs-episode one can
    solve the run, and the final figure is such an evaluation."""
    config = _slippery_tabular(40_000)
    config.evaluator.update(dict(target_success=0.9, num_envs=8, confirm_envs=2000))
    result = local.train(config)
    assert not result.solved and result.env_steps >= 40_000
    assert result.eval_episodes == 2000 and result.success_high < 0.9
    assert result.exact["max_success"] < 0.745


def test_slippery_target_of_optimal_is_confirmed_and_exact():
    config = _slippery_tabular(400_000)
    config.evaluator.update(dict(target_of_optimal=0.95, num_envs=100))
    result = local.train(config)
    assert result.solved, result
    assert result.target == pytest.approx(0.95 * result.exact["optimal_success"])
    assert result.eval_episodes == 10_000 and result.success_low >= result.target
    assert result.exact["success"] >= result.target - 0.02  # the exact figure agrees


def test_learner_steps_and_seconds_budgets_stop_between_calls():
    config = load_config("a2c")
    config.evaluator.target_success, config.budget.env_steps = 0.0, 0
    config.budget.learner_steps, config.local.iterations_per_call = 6, 3
    result = local.train(config)
    assert result.updates == 6 and result.iterations == 3  # 2 updates per iteration


def _acting_nan_from_step_2(monkeypatch, field: str):
    """distrl.local's agents with `field` (the acting `policy` or the `greedy` one) NaN
    for copy 1 once its Clock env shows step 2, as diverged params would act."""
    make_agent = local.agents.make_agent

    def nan(obs, actions):
        bad = (jnp.arange(obs.shape[0]) == 1)[:, None] & (obs >= 2)
        return jnp.where(bad, jnp.nan, actions)

    def policy_of(agent):
        def policy(params, key, obs, epsilon):
            actions, extras = agent.policy(params, key, obs, epsilon)
            return nan(obs, actions), extras

        return policy

    def made(*args, **kwargs):
        agent = make_agent(*args, **kwargs)
        if field == "policy":
            return agent._replace(policy=policy_of(agent))
        return agent._replace(greedy=lambda params, obs: nan(obs, agent.greedy(params, obs)))

    monkeypatch.setattr(local.agents, "make_agent", made)


@pytest.mark.parametrize("field, who", [("policy", "distrl.local"), ("greedy", "evaluation")])
def test_a_nonfinite_action_stops_training_naming_its_copy_and_step(monkeypatch, field, who):
    """SAC on the Clock env (5-step episodes; 3 copies, chunks of 4 steps), acting NaN
    for copy 1 from the third step of its episodes: in the training rollouts or in the
    first greedy evaluation, `local.train` raises the actors' EnvError naming the env,
    who acted, the copy and the step, rather than reporting a NaN return."""
    _acting_nan_from_step_2(monkeypatch, field)
    config = config_lib.base_config("sac")
    config.env.name = "tests.user_envs:make_clock"
    config.num_actors, config.actor.num_envs, config.actor.unroll_length = 1, 3, 4
    config.agent.hidden_sizes = (8,)
    config.learner.batch_size, config.replay.min_size, config.replay.max_size = 6, 6, 600
    config.evaluator.update(dict(num_envs=3, confirm_envs=3))
    config.local.eval_every = 1
    config.budget.update(dict(env_steps=1_000, seconds=0.0))
    with pytest.raises(EnvError) as err:
        local.train(config)
    assert str(err.value) == (
        f"env tests.user_envs:make_clock ({who}, copy 1) at step 3: the policy's action is "
        f"not finite (its params diverged)"
    )


def test_command_line_ends_a_diverged_run_in_one_line_with_exit_1(warm_python):
    """`python -m distrl.local` on a Clock whose rewards are NaN: the first update makes
    the params NaN, the next rollout acts NaN, and the command says so in one line
    (exit 1, as a failed run), not with a traceback."""
    code, out = _local(
        warm_python,
        "--config=configs/sac_pendulum.py",
        "--config.env.name=tests.user_envs:make_clock",
        '--config.env.kwargs={"nan_reward": true}',
        "--config.actor.num_envs=3",
        "--config.actor.unroll_length=4",
        "--config.agent.hidden_sizes=(8,)",
        "--config.learner.batch_size=6",
        "--config.replay.min_size=6",
        "--config.replay.max_size=600",
        "--config.evaluator.target_return=0",
        "--config.local.eval_every=1",
        "--config.budget.env_steps=1000",
        "--quiet",
    )
    assert code == 1, out[-3000:]
    assert "Traceback" not in out, out[-3000:]
    (line,) = [ln for ln in out.splitlines() if ln.startswith("distrl: env ")]
    # the training rollout or the greedy evaluation after that update, whichever acts first
    assert re.fullmatch(
        r"distrl: env tests\.user_envs:make_clock \((distrl\.local|evaluation), copy \d\) "
        r"at step \d+: the policy's action is not finite \(its params diverged\)",
        line,
    ), line


# Log records (Python's and absl's formats) share the output file with what is printed.
_LOG_LINE = re.compile(r"(DEBUG|INFO|WARNING|ERROR):|[IWEF]\d{4} ")


def _local(warm_python, *args):
    """`python -m distrl.local ARGS` as a user runs it (forked from a warm interpreter:
    conftest); (exit status, combined output)."""
    code, out, _ = warm_python.run("distrl.local", *args, timeout=600)
    return code, out


def test_command_line_takes_the_experiment_config(warm_python):
    code, out = _local(
        warm_python,
        "--config=configs/tabular_q.py",
        "--config.budget.env_steps=30000",
        "--config.env.slippery=False",
        "--quiet",
    )
    assert code == 0, out[-2000:]
    assert "tabular on 4x4: solved=True" in out and "greedy policy:" in out
    printed = [line for line in out.splitlines() if not _LOG_LINE.match(line)]
    assert "env_steps=" in printed[0]  # --quiet: no per-call lines before it
    assert "Unable to initialize backend" not in out  # JAX's missing-plugin noise


def test_command_line_shows_progress_and_stops_within_an_iteration_of_its_seconds(warm_python):
    """budget.seconds with no target: the launcher's progress line while it runs, and
    the run's last jitted call, one iteration long, ends within that iteration of the
    budget (the tolerance is the run's own last call, as its summary prints it)."""
    budget = 15.0  # above its compile (3 s from the cache here; over 10 s at load 16)
    code, out = _local(
        warm_python,
        "--config=configs/ppo.py",
        f"--config.budget.seconds={budget}",
        "--config.budget.env_steps=0",
        "--config.evaluator.target_success=0",
    )
    assert code == 0, out[-2000:]
    shown = [float(t) for t in re.findall(r"^\[ *(\d+)s\] env steps .* left: .* s$", out, re.M)]
    assert len(shown) >= 2 and shown == sorted(shown), out[-2000:]
    summary = re.search(
        r"solved=False .*compile ([\d.]+)s, trained until ([\d.]+)s, "
        r"last call (\d+) iterations? in ([\d.]+)s",
        out,
    )
    assert summary, out[-2000:]
    compile_s, trained, iterations, last = map(float, summary.groups())
    # lines while it ran and one at its end (their seconds are printed whole: +-0.5)
    assert compile_s <= shown[0] + 0.5 and abs(shown[-1] - trained) <= 0.5
    assert iterations == 1 and trained <= budget + last + 0.001  # printed to the ms


@pytest.mark.parametrize(
    "args,message",
    [
        (["--config.agent.learning_rate=nan"], "bad config: config.agent.learning_rate=nan"),
        (["--config.num_actors=2.5"], "bad flag: flag --config.num_actors=2.5"),
        (["--algo=dqn"], "bad flag: Unknown command line flag 'algo'"),
    ],
)
def test_command_line_refuses_bad_input_with_exit_2(args, message, warm_python):
    code, out = _local(warm_python, "--config=configs/dqn.py", *args)
    assert code == 2 and message in out and "Traceback" not in out, out[-2000:]
