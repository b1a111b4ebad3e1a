"""Envs stepped in Python (gymnasium): names and spaces to specs, every refusal in one
line, the host rollout's chunks against known answers (episode ends, truncation,
autoreset), the evaluator's episodes, failures named with the env and the step,
gymnasium's own FrozenLake tables against the built-in gridworld's optimum, and Taxi's
300 start states: exact expected returns against its own episodes, the return target."""

import os
import subprocess
import sys
import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from distrl import config as config_lib
from distrl import envs, evaluator_config, packing, pipelines
from distrl import experiment as experiment_lib
from distrl.acting import exact_check, host_evaluation, host_rollout, reporting
from distrl.envs import exact, factory
from distrl.pyenv import EnvError


def _config(name="tests.gym_envs:countdown", kwargs="{}", algorithm="ppo", **env):
    c = config_lib.base_config(algorithm)
    c.env.name, c.env.kwargs = name, kwargs
    c.env.update(env)
    c.evaluator.target_success = 0.0
    return c


@pytest.mark.parametrize(
    "name, kwargs, kind, spec",
    [
        ("gymnasium:CartPole-v1", {}, "HostEnv", ((4,), "float32", 2, 500)),
        ("gymnasium:FrozenLake8x8-v1", {}, "GridHostEnv", ((64,), "float32", 4, 200)),
        ("gymnasium:Taxi-v4", {}, "TabularHostEnv", ((500,), "float32", 6, 200)),
        (
            "gymnasium:CliffWalking-v1",
            {"max_episode_steps": 50},
            "TabularHostEnv",
            ((48,), "float32", 4, 50),
        ),
        ("tests.gym_envs:countdown", {"limit": 7}, "HostEnv", ((1,), "float32", 2, 7)),
        ("tests.gym_envs:Countdown", {}, None, None),  # a class: no time limit (below)
    ],
)
def test_a_gymnasium_name_gives_a_spec_from_its_spaces(name, kwargs, kind, spec):
    if kind is None:
        with pytest.raises(factory.FactoryError, match="no time limit"):
            factory.build(name, kwargs)
        return
    env = factory.build(name, kwargs)
    assert envs.is_host_env(env) and type(env).__name__ == kind
    assert env.spec == envs.EnvSpec(*spec)
    assert hash(env) == hash(factory.build(name, kwargs))  # a static argument, equal by name


def test_a_discrete_observation_is_one_hot_and_capabilities_follow_the_tables():
    lake = factory.build("gymnasium:FrozenLake-v1", {})
    assert np.array_equal(lake.encode(np.array([0, 5])), np.eye(16, dtype=np.float32)[[0, 5]])
    assert envs.tabular_model(lake) is lake and envs.grid_of(lake) is lake
    assert lake.desc == ("SFFF", "FHFH", "FFFH", "HFFG") and lake.start_cell == 0
    d = lake.dynamics()
    assert d.terminal.sum() == 5 and list(np.flatnonzero(d.goal)) == [15]
    cart = factory.build("gymnasium:CartPole-v1", {})
    assert envs.tabular_model(cart) is None and envs.success_signal(cart) is None


def _taxi_episode(env, policy, start: int):
    """The return and whether it delivered: one episode of gymnasium's own Taxi-v4 from
    state `start`, acting `policy` [S] (Taxi is deterministic: one episode is exact)."""
    import gymnasium  # noqa: PLC0415

    taxi = gymnasium.make("Taxi-v4")
    taxi.reset(seed=0)
    taxi.unwrapped.s = start
    state, total = start, 0.0
    while True:
        state, reward, terminated, truncated, _ = taxi.step(int(policy[state]))
        total += reward
        if terminated or truncated:
            return total, terminated


def test_taxi_starts_anywhere_and_its_exact_return_is_the_mean_of_its_episodes():
    """Taxi-v4 (v3's tables: v4 changed only is_rainy and fickle_passenger) is a
    tabular model with 300 equally likely start states; pi*'s exact expected return
    over them (undiscounted, the mean an episode estimates) is the mean of gymnasium's
    own episodes from each start state, all delivered: +7.93, 21 - the mean shortest
    route (20 for the drop-off, -1 per other step)."""
    taxi = factory.build("gymnasium:Taxi-v4", {})
    assert envs.tabular_model(taxi) is taxi and envs.grid_of(taxi) is None
    starts = np.flatnonzero(taxi.start_distribution)
    assert len(starts) == 300 and np.allclose(taxi.start_distribution[starts], 1 / 300)
    d = taxi.dynamics()
    assert d.terminal.sum() == d.goal.sum() == 4  # the passenger delivered at R, G, Y, B
    best = exact.optimum(taxi, 0.99)
    played = [_taxi_episode(taxi, best.policy, s) for s in starts]
    assert all(delivered for _, delivered in played)
    mean = np.mean([r for r, _ in played])
    assert exact.at_start(taxi, best.returns) == pytest.approx(mean, abs=1e-9)
    assert mean == pytest.approx(7.93, abs=1e-9)
    assert exact.at_start(taxi, best.success) == 1.0
    # the uniform random policy, also exact: mostly truncated after 200 steps
    uniform = np.full((taxi.num_cells, 6), 1 / 6)
    assert (
        exact.at_start(taxi, exact.evaluate_stochastic_policy(taxi, uniform, 0.99).returns) < -700
    )


def test_the_optimal_return_target_and_the_exact_answer_on_taxi():
    c = _config("gymnasium:Taxi-v4", algorithm="dqn")
    c.evaluator.update(dict(target_success=evaluator_config.AUTO, target_of_optimal=0.98))
    experiment = experiment_lib.Experiment(c)
    env, agent = experiment.env, experiment.agent
    best = exact.optimum(env, agent.config.discount)
    c.evaluator.optimal_measure = "return"
    experiment_lib.make(c)
    # 98% of +7.93: a shortfall of 2% of its magnitude, and no success target beside it
    assert evaluator_config.targets(c, env, best) == (0.0, pytest.approx(7.93 - 0.02 * 7.93))
    c.evaluator.optimal_measure = "success"  # pi* delivers from every start: 0.98
    assert evaluator_config.targets(c, env, best) == (pytest.approx(0.98), 0.0)
    params = agent.init(jax.random.PRNGKey(0)).params
    answer = exact_check.exact_answer(env, agent, params, agent.config.discount, best)
    assert answer["optimal_return"] == pytest.approx(7.93)
    assert -200 * 10 <= answer["mean_return"] < answer["optimal_return"]
    assert answer["return_ratio"] == pytest.approx(1 - (7.93 - answer["mean_return"]) / 7.93)
    assert "mean return" in reporting.describe_exact(answer)


def test_the_return_target_allows_a_shortfall_of_a_fraction_of_the_optimums_size():
    assert exact.return_target(7.93, 0.98) == pytest.approx(7.7714)
    assert exact.return_target(-13.0, 0.98) == pytest.approx(-13.26)  # CliffWalking's
    assert exact.return_target(0.0, 0.5) == 0.0
    cliff = factory.build("gymnasium:CliffWalking-v1", {"max_episode_steps": 100})
    assert exact.at_start(cliff, exact.optimum(cliff, 0.99).returns) == pytest.approx(-13.0)


@pytest.mark.parametrize(
    "name, kwargs, message",
    [
        ("gymnasium:NoSuchEnv-v0", "{}", "gymnasium: Environment `NoSuchEnv` doesn't exist"),
        ("tests.gym_envs:continuous", "{}", "are not finite"),
        ("gymnasium:CartPole-v1", '{"bogus": 1}', "unexpected keyword argument 'bogus'"),
        ("gymnasium:Blackjack-v1", '{"max_episode_steps": 5}', "need a Box (any shape)"),
        ("tests.gym_envs:NoLimit", "{}", "no time limit"),
    ],
)
def test_an_env_the_networks_cannot_take_is_a_config_error(name, kwargs, message):
    with pytest.raises(config_lib.ConfigError, match="config.env.name=") as err:
        experiment_lib.make(_config(name, kwargs))
    assert message in str(err.value) and "\n" not in str(err.value)


def test_box_actions_are_taken_by_the_agents_that_act_in_them():
    experiment_lib.make(_config("gymnasium:Pendulum-v1", algorithm="ppo"))
    with pytest.raises(config_lib.ConfigError, match="acts in Discrete action spaces"):
        experiment_lib.make(_config("gymnasium:Pendulum-v1", algorithm="dqn"))


def test_async_copies_only_for_an_env_stepped_in_python():
    with pytest.raises(config_lib.ConfigError, match="only an env stepped in Python"):
        experiment_lib.make(_config("gridworld", vector="async"))
    with pytest.raises(config_lib.ConfigError, match="need 'sync' or 'async'"):
        experiment_lib.make(_config(vector="threads"))
    experiment_lib.make(_config(vector="async"))


def _first_actions(params, key, obs, epsilon):
    return jnp.zeros(obs.shape[:1], jnp.int32), {"seen": obs[:, 0]}


def _unroll(name, kwargs, num_envs=2, steps=5, mode="sync", timeout_s=0.0):
    env = factory.build(name, kwargs)
    stepper = host_rollout.VectorStepper(env, num_envs, mode, timeout_s)
    act = host_rollout.HostAct(stepper, _first_actions, steps, lambda tail, chunk: (chunk, None))
    carry = act.init_carry(0)
    try:
        return act.unroll(None, carry, jax.random.PRNGKey(0), 0.0)
    finally:
        act.close()


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_termination_ends_the_transition_and_the_next_starts_from_the_reset(mode):
    """Countdown(3): obs t, reward t+1; the 3rd step terminates (discount 0, last), and
    the 4th transition starts from the reset observation 0, never crossing the end."""
    chunk, stats = _unroll("tests.gym_envs:countdown", {"length": 3}, mode=mode)
    column = lambda x: np.asarray(x)[:, 0].tolist()  # noqa: E731 - env 0; env 1 is alike
    assert column(chunk.observation[..., 0]) == [0, 1, 2, 0, 1]
    assert column(chunk.next_observation[..., 0]) == [1, 2, 3, 1, 2]
    assert column(chunk.reward) == [1, 2, 3, 1, 2]
    assert column(chunk.discount) == [1, 1, 0, 1, 1]
    assert column(chunk.last) == [False, False, True, False, False]
    assert column(chunk.extras["seen"]) == [0, 1, 2, 0, 1]  # what the policy saw
    assert np.array_equal(chunk.observation, np.asarray(chunk.observation)[:, ::-1])
    assert (int(stats.env_steps), int(stats.episodes), float(stats.return_sum)) == (10, 2, 12.0)
    assert int(stats.length_sum) == 6


def test_truncation_bootstraps_from_the_observation_reached():
    """Countdown(100) cut after 2 steps: last with discount 1, next_observation the state
    reached (2), not the reset observation the policy acts on next (0)."""
    chunk, stats = _unroll("tests.gym_envs:countdown", {"length": 100, "limit": 2})
    column = lambda x: np.asarray(x)[:, 0].tolist()  # noqa: E731
    assert column(chunk.observation[..., 0]) == [0, 1, 0, 1, 0]
    assert column(chunk.next_observation[..., 0]) == [1, 2, 1, 2, 1]
    assert column(chunk.discount) == [1, 1, 1, 1, 1]
    assert column(chunk.last) == [False, True, False, True, False]
    assert (int(stats.episodes), float(stats.return_sum)) == (4, 12.0)


def test_a_chunk_becomes_the_pipelines_items_with_the_tables_signature():
    """Every pipeline's item function takes the host chunk, and the items unpack with
    the structure, shapes and dtypes of the Reverb table's example item."""
    for algorithm in ("dqn", "ppo", "reinforce"):
        c = _config("gymnasium:CartPole-v1", algorithm=algorithm)
        c.actor.num_envs, c.actor.unroll_length = 4, 8
        experiment = experiment_lib.Experiment(c)
        env, agent = experiment.env, experiment.agent
        pipeline = pipelines.of(agent.config)
        act = host_rollout.make_act(env, agent.policy, c, pipeline.item_fn(agent.config, c, env))
        carry, tail = act.init_carry(1), None
        params = agent.init(jax.random.PRNGKey(0)).params
        for i in range(3):  # the first call has no tail; later ones do
            (carry, tail), packed = act(params, carry, jax.random.PRNGKey(i), 0.1, tail)
        items, stats = act.unpack(packed)
        act.close()
        example = pipeline.example_item(c, env).data
        assert jax.tree.structure(items) == jax.tree.structure(example), algorithm
        for got, want in zip(jax.tree.leaves(items), jax.tree.leaves(example)):
            want = np.asarray(want)
            assert got.shape[got.ndim - want.ndim :] == want.shape, (algorithm, got.shape)
            assert got.dtype == want.dtype, (algorithm, got.dtype, want.dtype)
        assert int(stats.env_steps) == 32


def test_straight_line_threefry_draws_the_same_bits_without_a_loop():
    """A host actor's process lowers threefry straight-line (`unrolled_threefry`): PPO's
    per-step policy call draws the same actions, log-probs and values as under JAX's
    rolled loop, and compiles with no loop (whose small independent thunks XLA:CPU
    ran on other threads)."""
    c = _config("gymnasium:CartPole-v1", algorithm="ppo")
    agent = experiment_lib.Experiment(c).agent
    params = agent.init(jax.random.PRNGKey(0)).params
    obs = np.random.default_rng(0).normal(size=(16, 4)).astype(np.float32)

    def compiled():
        step = jax.jit(lambda p, k, o: packing.pack(agent.policy(p, k, o, 0.0)))
        return step.lower(params, jax.random.PRNGKey(0), obs).compile()

    try:
        assert not host_rollout.unrolled_threefry(False)
        rolled = compiled()
        assert host_rollout.unrolled_threefry(True)
        straight = compiled()
    finally:
        host_rollout.unrolled_threefry(False)
    assert "while" in rolled.as_text() and "while" not in straight.as_text()
    for seed in range(20):
        key = jax.random.PRNGKey(seed)
        assert np.array_equal(rolled(params, key, obs), straight(params, key, obs)), seed


def test_the_evaluator_plays_exactly_its_episodes_and_scores_success():
    """Guess(3) with the greedy policy of a Q table that knows the answer: 1000
    one-step episodes, every one a success; an agent acting 0 scores about 1/3."""
    c = _config("tests.gym_envs:guess", algorithm="tabular")
    experiment = experiment_lib.Experiment(c)
    env, agent = experiment.env, experiment.agent
    params = agent.init(jax.random.PRNGKey(0)).params
    evaluate = host_evaluation.make_evaluator(env, agent, 1000, True, c)
    result = jax.device_get(evaluate(params, jax.random.PRNGKey(3)))
    evaluate.close()
    assert int(result.episodes) == 1000 and float(result.mean_length) == 1.0
    assert 0.25 < float(result.mean_return) < 0.42  # an untrained Q: one fixed action
    assert result.return_low < result.mean_return < result.return_high


def test_a_nonfinite_action_in_a_host_evaluation_is_named_with_its_copy_and_step():
    """The evaluator's host episodes acted NaN for copy 1 (diverged params): the
    evaluator checks the actions before its copies step (`rollout.check_actions`), the
    same EnvError as a JAX env's evaluation raises, not a NaN return."""

    def greedy(params, obs):
        bad = jnp.arange(obs.shape[0]) == 1
        return jnp.where(bad[:, None], jnp.nan, 0.25) * jnp.ones((obs.shape[0], 1))

    c = _config("gymnasium:Pendulum-v1", algorithm="sac")
    experiment = experiment_lib.Experiment(c)
    env, agent = experiment.env, experiment.agent._replace(greedy=greedy)
    evaluate = host_evaluation.make_evaluator(env, agent, 3, True, c)
    try:
        with pytest.raises(EnvError) as err:
            evaluate(None, jax.random.PRNGKey(0))
    finally:
        evaluate.close()
    assert str(err.value) == (
        "env gymnasium:Pendulum-v1 (evaluation, copy 1) at step 1: the policy's action is "
        "not finite (its params diverged)"
    )


def test_frozenlake_tables_give_the_gridworlds_optimum_on_the_same_map():
    """gymnasium's FrozenLake-v1 4x4 slippery (rewards 1 on G, 0 elsewhere, 100 steps)
    and the gridworld on the same map with rewards (1, 0, 0): the same dynamics, so the
    same exact optimum. With the gridworld's default rewards (-1 in a hole) the
    discounted pi* differs (holes cost value), but the best success any policy can
    reach within the limit does not depend on rewards and stays equal."""
    lake = factory.build("gymnasium:FrozenLake-v1", {})
    ours = envs.make_env(map_name="4x4", slippery=True, rewards=(1.0, 0.0, 0.0))
    assert ours.spec.time_limit == lake.spec.time_limit == 100
    a, b = exact.optimum(lake, 0.99), exact.optimum(ours, 0.99)
    s = lake.start_cell
    assert a.success[s] == pytest.approx(b.success[s], abs=1e-12)
    assert a.value[s] == pytest.approx(b.value[s], abs=1e-12)
    assert a.max_success[s] == pytest.approx(b.max_success[s], abs=1e-12)
    assert np.allclose(a.value, b.value, atol=1e-12)
    default = exact.optimum(envs.make_env(map_name="4x4", slippery=True), 0.99)
    assert default.max_success[s] == pytest.approx(a.max_success[s], abs=1e-12)
    assert 0.7 < a.success[s] < 0.8


def test_the_exact_answer_scores_a_policy_on_gymnasiums_tables():
    c = _config("gymnasium:FrozenLake-v1", algorithm="tabular")
    experiment = experiment_lib.Experiment(c)
    env, agent = experiment.env, experiment.agent
    params = agent.init(jax.random.PRNGKey(0)).params
    answer = exact_check.exact_answer(env, agent, params, 0.99)
    assert 0 <= answer["success"] <= answer["max_success"] <= 1
    assert answer["optimal_success"] == pytest.approx(
        exact.optimum(env, 0.99).success[env.start_cell]
    )


@pytest.mark.parametrize(
    "how, message",
    [
        ("raise", "step raised ValueError: the simulator lost its state"),
        ("shape", "observation of shape (2,) and dtype float32; its space needs shape (1,)"),
        ("dtype", "observation of shape (1,) and dtype float64; its space needs shape (1,) and"),
    ],
)
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_failing_env_is_named_with_its_copy_and_step(how, message, mode):
    with pytest.raises(EnvError) as err:
        _unroll("tests.gym_envs:faulty", {"how": how, "fail_at": 4}, mode=mode)
    text = str(err.value)
    assert text.startswith("env tests.gym_envs:faulty (copy ") and message in text, text
    assert "at step 4 (step 4 of its episode)" in text and "\n" not in text


@pytest.mark.parametrize("thread", ["main", "other"])
def test_a_hung_env_fails_after_the_step_timeout(thread):
    """In the main thread a watchdog interrupts the hung step itself (a signal); in any
    other thread the step runs in a worker thread that is abandoned. One message."""
    failed = []

    def unroll():
        try:
            _unroll("tests.gym_envs:faulty", {"how": "hang", "fail_at": 3}, timeout_s=0.5)
        except EnvError as err:
            failed.append(str(err))

    def left_stepping():
        return sum(t.name == "env stepper" for t in threading.enumerate())

    if thread == "main":
        before = left_stepping()
        unroll()
        assert left_stepping() == before  # interrupted in place: no thread left to the hang
    else:
        other = threading.Thread(target=unroll)
        other.start()
        other.join(timeout=60)
    assert failed == [
        "env tests.gym_envs:faulty: vector step 3 of its 2 copies took longer than 0.5 s "
        "(config.env.step_timeout_s)"
    ]


def test_async_copies_start_under_a_deep_tmpdir(tmp_path):
    """A node's TMPDIR lies inside the run directory; the forkserver's unix socket must
    still fit its 107 bytes (it failed with "AF_UNIX path too long")."""
    deep = tmp_path / ("d" * 100)
    deep.mkdir()
    script = (
        "import multiprocessing as mp\n"
        "from distrl.acting import host_rollout\n"
        "ctx = mp.get_context(host_rollout._forkserver())\n"
        "p = ctx.Process(target=print, args=('child ran',)); p.start(); p.join()\n"
        "print('exit', p.exitcode)\n"
    )
    env = dict(os.environ, TMPDIR=str(deep))
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert "child ran" in out.stdout and "exit 0" in out.stdout, out.stderr[-2000:]


def test_async_copies_do_not_import_the_parents_main_module(tmp_path):
    """multiprocessing has each child run its parent's main module (a trainer's or a
    node's: JAX and all); the copies are started without it, so a script's top level
    runs once, in the script, not in each copy or the forkserver."""
    marks = tmp_path / "marks"
    script = tmp_path / "trainer.py"
    script.write_text(
        "import os\n"
        f"open({str(marks)!r}, 'a').write(f'{{os.getpid()}}\\n')\n"
        "if __name__ == '__main__':\n"
        "    from distrl.acting import host_rollout\n"
        "    from distrl.envs import host_env\n"
        "    env = host_env.make('gymnasium:CartPole-v1', {})\n"
        "    stepper = host_rollout.VectorStepper(env, 2, host_rollout.ASYNC)\n"
        "    stepper.reset(0)\n"
        "    stepper.close()\n"
        "    print('stepped')\n"
    )
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert "stepped" in out.stdout, out.stderr[-2000:]
    assert len(marks.read_text().split()) == 1


def test_episode_statistics_per_chunk_match_a_step_by_step_count():
    """`_episodes` sums a chunk's ended episodes without a loop over steps; chunk after
    chunk (episodes running across them) it agrees with counting step by step."""
    rng = np.random.default_rng(0)
    b = 5
    carry = host_rollout.HostCarry(np.zeros((b, 1), np.float32))
    ret, length = np.zeros(b), np.zeros(b, np.int64)
    for _ in range(4):
        reward = rng.integers(-3, 4, (6, b)).astype(np.float32)
        last = rng.random((6, b)) < 0.3
        want = [0, 0.0, 0]
        for t in range(6):
            ret += reward[t]
            length += 1
            want[0] += int(last[t].sum())
            want[1] += float(ret[last[t]].sum())
            want[2] += int(length[last[t]].sum())
            ret[last[t]], length[last[t]] = 0.0, 0
        got = host_rollout._episodes(carry, reward, last)
        assert (got[0], got[1], got[2]) == (want[0], pytest.approx(want[1]), want[2])
        assert np.allclose(carry.episode_return, ret) and np.array_equal(
            carry.episode_length, length
        )


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_nonfinite_box_action_is_named_with_its_copy_and_step(mode):
    """A policy whose params diverged acts NaN: the copy refuses it before its env steps
    (`pyenv.Checked`), one line naming the env, the copy and the step."""

    def nan_for_copy_1(params, key, obs, epsilon):
        bad = jnp.arange(obs.shape[0]) == 1
        return jnp.where(bad[:, None], jnp.nan, 0.25) * jnp.ones((obs.shape[0], 1)), {}

    env = factory.build("gymnasium:Pendulum-v1", {})
    stepper = host_rollout.VectorStepper(env, 2, mode, 0.0)
    act = host_rollout.HostAct(stepper, nan_for_copy_1, 3, lambda tail, chunk: (chunk, None))
    try:
        with pytest.raises(EnvError) as err:
            act.unroll(None, act.init_carry(0), jax.random.PRNGKey(0), 0.0)
    finally:
        act.close()
    assert str(err.value) == (
        "env gymnasium:Pendulum-v1 (copy 1) at step 1 (step 1 of its episode): got action "
        "[nan]; need finite values within [[-2.0], [2.0]] (the action space)"
    )
