"""The single-process trainer: the whole loop in one jitted program, the reference the
distributed system is compared with.

Each iteration rolls out B envs for T steps with the shared rollout (`acting.rollout`)
and hands the chunk to the pipeline's `local_learn`: DQN adds it to a replay buffer of
JAX arrays (`agents.replay_buffer`) and takes a few updates, on-policy agents update on
the chunk itself. Iterations and the evaluation that decides when to stop run in ONE
jitted `lax.while_loop` (`_train_call`); Python only loops over those calls, sized by
time (`_plan`), and prints the launcher's progress line. An env stepped in Python
(gymnasium) runs `local_host`'s loop instead: the same data step jitted alone, the
actors' host rollout and the evaluator's host episodes around it. Same config and CLI
as `launch/train.py`:

    python -m distrl.local --config=configs/ppo.py --config.env.slippery=True

The config on one process (`Settings.of`; the data step is the pipeline's `local_*`):
- B = num_actors x actor.num_envs, stepped as one batch; T = actor.unroll_length.
- DQN: a uniform replay of replay.max_size transitions, sampled from replay.min_size
  on; samples_per_insert x T x B / learner.batch_size updates per iteration (at least
  1), the ratio Reverb's rate limiter keeps in the distributed run.
- on-policy: num_actors / learner.batch_chunks updates per iteration, each of
  [T, batch_chunks x actor.num_envs], the distributed learner's batch.
- stop: the evaluator's targets (`evaluator_config.targets`), confirmed as the
  evaluator confirms them (`_evaluate`); budget.env_steps inside the loop,
  budget.learner_steps and budget.seconds between calls.
- local.* holds the trainer's own settings. Unused: replay.sampler, priorities, queues,
  prefetch, params_update_period, epsilon_spread (one policy, always current),
  evaluator.every_seconds, log, checkpoint, ray and run_dir (nothing is written).
"""

import functools
import math
import sys
import threading
import time
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from distrl import agents, envs, evaluator_config, local_host, pipelines, resources
from distrl import config as config_lib
from distrl import experiment as experiment_lib
from distrl.acting import evaluation, exact_check, intervals, reporting, rollout
from distrl.envs import exact, host_env
from distrl.envs import section as env_section
from distrl.errors import check as _check
from distrl.program import progress
from distrl.pyenv import EnvError


class Settings(NamedTuple):
    """The trainer's view of an experiment (see the module docstring); no defaults of
    its own: `Settings.of(experiment)` derives every field."""

    num_envs: int  # B = num_actors x actor.num_envs
    rollout_length: int  # T = actor.unroll_length
    max_env_steps: int  # budget.env_steps (0: no limit -> int32 max)
    max_updates: int  # budget.learner_steps (0: none), checked between calls
    max_seconds: float  # budget.seconds (0: none), checked between calls
    target_success: float  # evaluator.target_success (0: none; -1: 1.0 if the env has success)
    target_of_optimal: float  # evaluator.target_of_optimal (> 0: replaces target_success)
    target_return: float  # evaluator.target_return (0: none)
    eval_every: int  # iterations between greedy evaluations
    greedy: bool  # not evaluator.sampled: evaluate the greedy policy, else the sampled one
    eval_envs: int  # evaluator.num_envs episodes per evaluation (1 on a deterministic map)
    confirm_envs: int  # evaluator.confirm_envs: episodes once the exact success reaches target
    iterations_per_call: int
    seed: int
    xla_opt_level: int  # -1: XLA's default
    replay_capacity: int  # DQN: transitions
    batch_size: int  # DQN: transitions per update; R2D2: sequences
    sequence_length: int  # R2D2: replay.sequence_length
    min_replay_size: int  # DQN: transitions before the first update
    updates_per_iteration: int  # the pipeline's `local_updates`
    env_name: str  # config.env.name, which a non-finite action's EnvError names

    @classmethod
    def of(cls, experiment) -> "Settings":
        """Maps a checked experiment (`distrl.experiment.make`) onto one process;
        ConfigError for an env stepped in Python where the pipeline's data step starts
        with a warm-up rollout (`Pipeline.local_warm_up`), which only a JAX env gives."""
        config = experiment.config
        pipeline = experiment.pipeline
        warm_up = pipeline.local_warm_up(experiment.agent_config)
        in_python = host_env.is_host_env(experiment.env)
        _check(
            not (warm_up and in_python),
            f"config.env.name={config.env.name!r} is stepped in Python (gymnasium), and "
            f"distrl.local's data step for {config.algorithm} starts with {warm_up} of a "
            f"JAX env's rollout; train it with launch/train.py",
        )
        a, r, b = config.actor, config.replay, config.budget
        envs = config.num_actors * a.num_envs
        updates = pipeline.local_updates(config)
        return cls(
            num_envs=envs,
            rollout_length=a.unroll_length,
            max_env_steps=min(b.env_steps or _INT32_MAX, _INT32_MAX),
            max_updates=b.learner_steps,
            max_seconds=b.seconds,
            target_success=config.evaluator.target_success,
            target_of_optimal=config.evaluator.target_of_optimal,
            target_return=config.evaluator.target_return,
            eval_every=config.local.eval_every or _cadence(config),
            greedy=not config.evaluator.sampled,
            eval_envs=config.evaluator.num_envs,
            confirm_envs=config.evaluator.confirm_envs,
            iterations_per_call=config.local.iterations_per_call,
            seed=config.seed,
            xla_opt_level=config.local.xla_opt_level,
            replay_capacity=r.max_size,
            batch_size=pipeline.local_batch(config),
            min_replay_size=r.min_size,
            sequence_length=r.sequence_length,
            updates_per_iteration=updates,
            env_name=config.env.name,
        )


_INT32_MAX = 2**31 - 1  # env steps are counted in int32 inside the jitted loop


def _cadence(config) -> int:
    """local.eval_every's auto (0): the distributed evaluator's env-step cadence in
    iterations of T x B env steps (at least 1), or every iteration where the evaluator
    judges on wall time instead (evaluator.every_env_steps 0)."""
    steps = config.evaluator.every_env_steps
    if not steps:
        return 1
    iteration = config.num_actors * config.actor.num_envs * config.actor.unroll_length
    return max(1, round(steps / iteration))


class TrainCarry(NamedTuple):
    """Everything the fused training loop carries between iterations."""

    state: agents.TrainingState
    rollout: rollout.RolloutCarry
    data: Any  # the pipeline's (`local_init`): DQN's replay buffer and n-step tail
    env_steps: jnp.ndarray  # int32 []
    iterations: jnp.ndarray  # int32 []
    episodes: jnp.ndarray  # int32 [], completed while training
    evaluation: intervals.EvalResult  # latest greedy evaluation
    evaluated_at: jnp.ndarray  # int32 [], env steps at the latest evaluation (-1: none yet)
    # int32 [], -1 without one: the first non-finite action (diverged params) of the
    # training rollouts (t * B + b over every step since the start) and of the latest
    # evaluation (t * its episodes + b); the loop stops at one, `_loop` names it
    nonfinite_action: jnp.ndarray
    nonfinite_evaluation: jnp.ndarray


class TrainResult(NamedTuple):
    """What `train` reports (host values)."""

    solved: bool
    env_steps: int
    updates: int
    iterations: int
    episodes: int
    wall_time: float  # seconds, including compilation
    compile_time: float  # seconds spent tracing and compiling (init and fused step)
    success_rate: float  # the final evaluation: confirm_envs episodes (1 if deterministic)
    mean_return: float
    mean_length: float
    params: Any
    report: str  # value, arrow and value-error grids ("" for an env without a grid)
    success_low: float = 0.0  # its 95% Wilson interval
    success_high: float = 0.0
    eval_episodes: int = 0
    target: float = 0.0  # the success the run had to confirm (0: none)
    return_low: float = 0.0  # the mean return's 95% interval
    return_high: float = 0.0
    target_return: float = 0.0  # the mean return the run had to confirm (0: none)
    has_success: bool = True  # the env has a success signal (else success_* read 0)
    exact: dict | None = None  # exact_check.exact_answer of the final params (tabular env)
    history: tuple = ()  # (env steps, seconds, exact success or nan) after each jitted call
    # (env steps, seconds, mean return) of each routine greedy evaluation a call ended on
    # (a call runs at most one when iterations_per_call <= eval_every; benchmarks/stability)
    evaluations: tuple = ()
    calls: tuple = ()  # (iterations, seconds) of each jitted call
    trained_time: float = 0.0  # seconds from the start to the end of the last call


def _iteration(env, agent, cfg: Settings, c: TrainCarry, key) -> TrainCarry:
    """One rollout of T x B steps, then the agent's update(s) (the pipeline's)."""
    roll_key, update_key = jax.random.split(key)
    eps = agent.epsilon(c.env_steps)
    rc, traj, stats = rollout.unroll(
        env, rollout.policy_of(agent), cfg.rollout_length, c.state.params, c.rollout, roll_key, eps
    )
    pipeline = pipelines.of(agent.config)
    state, data = pipeline.local_learn(agent, cfg, c.state, c.data, traj, update_key)
    first = stats.first_nonfinite_action
    return c._replace(
        state=state,
        rollout=rc,
        data=data,
        env_steps=c.env_steps + stats.env_steps,
        iterations=c.iterations + 1,
        episodes=c.episodes + stats.episodes,
        nonfinite_action=jnp.where(first >= 0, c.env_steps + first, c.nonfinite_action),
    )


def _reached(result, target: tuple, cfg: Settings):
    """The stop rule (`intervals.confirmed`) for target = (success, mean return)."""
    return intervals.confirmed(result, target[0], cfg.confirm_envs, target[1])


def _evaluate(env, agent, cfg: Settings, target: tuple, params, key):
    """The greedy (cfg.greedy False: sampled) evaluation: eval_envs episodes, or
    confirm_envs episodes once the greedy policy's exact success
    (`exact.make_policy_stats`, cheap) reaches the success target; an env without a
    tabular model, a run with a return target, or a sampled evaluation screens by
    eval_envs episodes instead, confirming when they touch the targets. target:
    (success, mean return), 0 where none. Returns (EvalResult, its first non-finite
    action: `evaluation.Episodes`)."""
    act = evaluation.make_act(agent, greedy=cfg.greedy)

    def run(key, n, exact=False):
        episodes = evaluation.play_episodes(env, act, params, key, n)
        return evaluation.summarize(episodes, exact), episodes.first_nonfinite_action

    if evaluation.is_deterministic(env, cfg.greedy):  # one episode is exact
        return run(key, 1, exact=True)
    screen_key, confirm_key = jax.random.split(key)
    model = envs.tabular_model(env)
    if not (target[0] or target[1]):  # nothing to confirm
        return run(screen_key, cfg.eval_envs)
    if model is None or target[1] or not cfg.greedy:  # the exact screen is the greedy's
        screen = run(screen_key, cfg.eval_envs)
        return jax.lax.cond(
            intervals.touches(screen[0], target[0], cfg.confirm_envs, target[1]),
            lambda: run(confirm_key, cfg.confirm_envs),
            lambda: screen,
        )
    actions = agent.greedy(params, jnp.asarray(model.cell_observations()))
    success, _, _ = exact.make_policy_stats(model)(actions)
    return jax.lax.cond(
        success >= target[0],
        lambda: run(confirm_key, cfg.confirm_envs),
        lambda: run(screen_key, cfg.eval_envs),
    )


def _train_call(env, agent, cfg: Settings, target: tuple, carry: TrainCarry, key, iterations):
    """Up to `iterations` iterations (a traced int32: any count, one compile); stops early
    on the env-step budget or confirmed success.

    Returns (carry, (values [S], greedy actions [S]) of every cell, or None without a
    grid) - the grids ride along so that the report needs no extra compile.
    """
    stop_at = carry.iterations + iterations

    def running(c):
        solved = _reached(c.evaluation, target, cfg)
        fine = (c.nonfinite_action < 0) & (c.nonfinite_evaluation < 0)
        return (c.iterations < stop_at) & (c.env_steps < cfg.max_env_steps) & ~solved & fine

    def evaluated(c, eval_key):
        result, first = _evaluate(env, agent, cfg, target, c.state.params, eval_key)
        return c._replace(evaluation=result, evaluated_at=c.env_steps, nonfinite_evaluation=first)

    def body(c):
        it_key, eval_key = jax.random.split(jax.random.fold_in(key, c.iterations))
        c = _iteration(env, agent, cfg, c, it_key)
        due = c.iterations % cfg.eval_every == 0
        return jax.lax.cond(due, lambda c_: evaluated(c_, eval_key), lambda c_: c_, c)

    carry = jax.lax.while_loop(running, body, carry)
    if not reporting.has_grids(env):
        return carry, None
    return carry, reporting.cell_values(agent, carry.state.params, env)


def init_carry(env, agent, cfg: Settings, key) -> TrainCarry:
    """Initial agent state, envs and the pipeline's data (`local_init`). Jittable."""
    agent_key, env_key, warm_key = jax.random.split(key, 3)
    state = agent.init(agent_key)
    rc = rollout.init_carry(env, env_key, cfg.num_envs, rollout.policy_of(agent))
    pipeline = pipelines.of(agent.config)
    rc, data, env_steps = pipeline.local_init(env, agent, cfg, state, rc, warm_key)
    zero = jnp.zeros((), jnp.float32)
    return TrainCarry(
        state,
        rc,
        data,
        jnp.int32(env_steps),
        jnp.int32(0),
        jnp.int32(0),
        intervals.EvalResult(*[zero] * len(intervals.EvalResult._fields)),
        evaluated_at=jnp.int32(-1),
        nonfinite_action=jnp.int32(-1),
        nonfinite_evaluation=jnp.int32(-1),
    )


def _compile(init_fn, call_fn, init_key, key, opt_level):
    """Compiles the init and the fused step concurrently (XLA releases the GIL)."""
    options = None if opt_level < 0 else {"xla_backend_optimization_level": opt_level}
    init_lowered = jax.jit(init_fn).lower(init_key)
    iterations = jax.ShapeDtypeStruct((), jnp.int32)
    call_lowered = jax.jit(call_fn).lower(init_lowered.out_info, key, iterations)
    compiled = {}
    worker = threading.Thread(target=lambda: compiled.update(init=init_lowered.compile(options)))
    worker.start()
    call_compiled = call_lowered.compile(options)
    worker.join()
    return compiled["init"], call_compiled


# A call's length away from the time budget: the launcher's plain progress cadence
# (progress.ProgressLine's plain_every), so a slow env still shows a line that often.
_LINE_SECONDS = 10.0
_SHOW_SECONDS = 1.0  # at most a line a second (the launcher redraws its line as often)


def _plan(cfg: Settings, left_in_block: int, slowest: float | None, elapsed: float) -> int:
    """Iterations for the next jitted call: the rest of the block, cut to _LINE_SECONDS
    and to a quarter of what is left of budget.seconds at the slowest seconds per
    iteration seen (a quarter, so that a call running up to 4x slower than any before,
    as on a loaded machine, still ends in time), so that the last call before the time
    budget is one iteration; 1 before any call is timed. docs/decisions.md, "The
    single-process trainer judges at the evaluator's env-step cadence and compiles at
    XLA's full optimisation"."""
    if slowest is None:
        return 1
    window = _LINE_SECONDS
    if cfg.max_seconds:
        window = min(window, (cfg.max_seconds - elapsed) / 4)
    return max(1, min(left_in_block, int(window / max(slowest, 1e-9))))


def _progress_row(ev, answer, steps, updates, elapsed, rates, success: bool) -> dict:
    """The figures of the evaluator's metrics row that `progress.format_line` shows."""
    row = dict(
        elapsed=elapsed,
        env_steps=steps,
        env_steps_per_s=rates[0],
        learner_steps=updates,
        updates_per_s=rates[1],
        mean_return=float(ev.mean_return),
    )
    if success:
        row.update(success_rate=float(ev.success_rate))
    if answer is not None:
        row.update(exact_success=answer["success"], optimal_success=answer["optimal_success"])
        row.update(exact_return=answer["mean_return"], optimal_return=answer["optimal_return"])
    return row


def _loop(env, step, carry: TrainCarry, key, cfg: Settings, target, log, start: float, judge):
    """Calls the compiled step until solved or out of budget.

    Iterations come in blocks of `iterations_per_call`, each with its own key (the
    random stream does not depend on how a block is cut into calls); a block is cut
    into calls sized by `_plan`. judge(params) -> `exact_check.exact_answer` or None.
    log(row) gets the progress row once there is an evaluation: at most once every
    _SHOW_SECONDS, and the last one.
    Returns (carry, grids, history, calls, evaluations): history holds (env steps,
    seconds, exact success or nan) after each call, calls (iterations, seconds) of each
    call, evaluations (env steps, seconds, mean return) of each new greedy evaluation.
    """
    history, calls, evaluations, seen = [], [], [], -1
    success = reporting.has_success(env)
    steps, updates, done = (int(x) for x in (carry.env_steps, carry.state.step, carry.iterations))
    block_end, slowest, shown, row = done, None, -math.inf, None  # row: not yet shown
    while True:
        if done >= block_end:
            key, call_key = jax.random.split(key)
            block_end = done + cfg.iterations_per_call
        n = _plan(cfg, block_end - done, slowest, time.perf_counter() - start)
        began = time.perf_counter()
        if calls and 0 < cfg.max_seconds <= began - start:  # every call starts in time
            break
        carry, grids = step(carry, call_key, jnp.int32(n))
        ev, at, now_steps, now_updates, now_done = jax.device_get(
            (
                carry.evaluation,
                carry.evaluated_at,
                carry.env_steps,
                carry.state.step,
                carry.iterations,
            )
        )
        _check_actions(carry, ev, cfg)
        took = time.perf_counter() - began
        elapsed = began + took - start
        ran = int(now_done) - done
        slowest = max(slowest or 0.0, took / max(ran, 1))
        calls.append((ran, took))
        answer = judge(carry.state.params)
        history.append((int(now_steps), elapsed, answer["success"] if answer else math.nan))
        if at > seen:
            seen = int(at)
            evaluations.append((seen, elapsed, float(ev.mean_return)))
        rates = ((now_steps - steps) / took, (now_updates - updates) / took)
        steps, updates, done = int(now_steps), int(now_updates), int(now_done)
        if log and ev.episodes > 0:
            row = _progress_row(ev, answer, steps, updates, elapsed, rates, success)
            if elapsed - shown >= _SHOW_SECONDS:
                log(row)
                shown, row = elapsed, None
        if (
            _reached(ev, target, cfg)
            or steps >= cfg.max_env_steps
            or 0 < cfg.max_updates <= updates
        ):
            break
    if row is not None:  # the last figures, whenever the line was shown last
        log(row)
    return carry, grids, history, calls, evaluations


WHO = "distrl.local"  # who acted, in the error of a non-finite action (`rollout.check_actions`)


def _check_actions(carry: TrainCarry, ev, cfg: Settings) -> None:
    """`EnvError` naming the env, copy and step of a non-finite action in the training
    rollouts or the latest evaluation (`rollout.check_actions`, as the actors'), which
    would otherwise show only as NaN returns."""
    rollout.check_actions(carry.nonfinite_action, cfg.env_name, WHO, cfg.num_envs)
    episodes = max(1, int(ev.episodes))
    rollout.check_actions(carry.nonfinite_evaluation, cfg.env_name, evaluation.WHO, episodes)


def train(config, log=None, env=None) -> TrainResult:
    """Trains until the targets are confirmed (`_evaluate`) or a budget ends.

    config: an experiment config (`distrl.config.base_config`, `configs/*.py`);
    ConfigError before anything is compiled when it cannot work here (including
    the memory estimate and a target the env cannot score). log: optional
    callable(str) for the progress lines (the launcher's, `_loop`). env: an env of the
    interface (`distrl.envs.interface`) to train on instead of `config.env`'s.
    The result's figures come from an evaluation of `evaluator.confirm_envs` episodes
    (`_final_evaluation`); for an env with a tabular model (`envs.tabular_model`) also
    the greedy policy's exact success against the optimum's and its learned value
    against the exact one (`exact_check.exact_answer`), and the grids where it has them.
    """
    start = time.perf_counter()
    experiment = experiment_lib.make(config, env)
    cfg = Settings.of(experiment)
    warning = resources.check_memory(experiment, local=True)
    if warning and log:
        log(warning)
    env, agent = experiment.env, experiment.agent
    discount = agent.config.discount
    model = envs.tabular_model(env)
    best = exact.optimum(model, discount) if model is not None else None
    target = evaluator_config.targets(config, env, best)  # (success, mean return); 0: none
    init_key, key = jax.random.split(jax.random.PRNGKey(cfg.seed))

    def judge(params):
        return (
            None if model is None else exact_check.exact_answer(env, agent, params, discount, best)
        )

    def show(row):  # the launcher's progress line (program/progress.py)
        log(progress.format_line(row, config, row["elapsed"]))

    show = show if log else None
    if host_env.is_host_env(env):
        run = _train_host(experiment, cfg, target, key, start, show, judge)
    else:
        if log:
            log("distrl.local: compiling the training step ...")
        run = _train_fused(experiment, cfg, target, (init_key, key), start, show, judge)
    state, ev, grids = run.state, run.final, run.grids
    answer = judge(state.params)
    return TrainResult(
        solved=bool(_reached(ev, target, cfg)),
        env_steps=run.env_steps,
        updates=int(state.step),
        iterations=run.iterations,
        episodes=run.episodes,
        wall_time=time.perf_counter() - start,
        compile_time=run.compile_time,
        success_rate=float(ev.success_rate),
        mean_return=float(ev.mean_return),
        mean_length=float(ev.mean_length),
        params=state.params,
        report=reporting.report(env, grids=grids, answer=answer) if grids is not None else "",
        success_low=float(ev.success_low),
        success_high=float(ev.success_high),
        eval_episodes=int(ev.episodes),
        target=target[0],
        exact=answer,
        return_low=float(ev.return_low),
        return_high=float(ev.return_high),
        target_return=target[1],
        has_success=reporting.has_success(env),
        history=run.history,
        evaluations=run.evaluations,
        calls=run.calls,
        trained_time=run.trained_time,
    )


class _Trained(NamedTuple):
    """What either loop hands `train` (host values but `state`)."""

    state: agents.TrainingState
    final: intervals.EvalResult  # the last policy's (`_final_evaluation`)
    grids: Any  # (values, greedy actions) of every cell, or None without a grid
    env_steps: int
    iterations: int
    episodes: int
    compile_time: float
    trained_time: float
    history: tuple
    evaluations: tuple
    calls: tuple


def _train_fused(experiment, cfg: Settings, target, keys, start, show, judge) -> _Trained:
    """A JAX env's run: the fused jitted step (`_train_call`) called by `_loop`."""
    env, agent = experiment.env, experiment.agent
    init_key, key = keys
    init_fn, step = _compile(
        functools.partial(init_carry, env, agent, cfg),
        functools.partial(_train_call, env, agent, cfg, target),
        init_key,
        key,
        cfg.xla_opt_level,
    )
    compile_time = time.perf_counter() - start
    carry, grids, history, calls, evaluations = _loop(
        env, step, init_fn(init_key), key, cfg, target, show, start, judge
    )
    return _Trained(
        carry.state,
        _final_evaluation(env, agent, cfg, carry, key),
        grids,
        int(carry.env_steps),
        int(carry.iterations),
        int(carry.episodes),
        compile_time,
        trained_time=history[-1][1],
        history=tuple(history),
        evaluations=tuple(evaluations),
        calls=tuple(calls),
    )


def _train_host(experiment, cfg: Settings, target, key, start, show, judge) -> _Trained:
    """An env stepped in Python: `local_host`'s loop, the data step jitted alone."""
    env, agent = experiment.env, experiment.agent
    success = reporting.has_success(env)

    def show_row(ev, answer, steps, updates, elapsed, rates):
        show(_progress_row(ev, answer, steps, updates, elapsed, rates, success))

    run = local_host.run(experiment, cfg, target, key, start, show_row if show else None, judge)
    final_key = jax.random.fold_in(key, 2**31 - 1)
    grids = None
    if reporting.has_grids(env):
        grids = reporting.cell_values_jit(agent, run.state.params, env)
    return _Trained(
        run.state,
        local_host.final_evaluation(experiment, cfg, run, final_key),
        grids,
        run.env_steps,
        run.iterations,
        run.episodes,
        run.compile_time,
        run.trained_time,
        run.history,
        run.evaluations,
        run.calls,
    )


def _final_evaluation(env, agent, cfg: Settings, carry: TrainCarry, key):
    """The last evaluation if it already holds confirm_envs episodes (or is exact), else a
    fresh one of confirm_envs episodes: the figure a run reports is never a small sample."""
    ev = jax.device_get(carry.evaluation)
    if evaluation.is_deterministic(env, cfg.greedy) or ev.episodes >= cfg.confirm_envs:
        return ev
    evaluate = evaluation.make_evaluator(
        env, agent, cfg.confirm_envs, cfg.greedy, env_name=cfg.env_name
    )
    return jax.device_get(evaluate(carry.state.params, jax.random.fold_in(key, 2**31 - 1)))


def _per_iteration(call) -> str:
    iterations, seconds = call
    return f"{iterations} iteration{'s' * (iterations != 1)} in {seconds:.3f}s"


def main(config, quiet: bool = False) -> TrainResult:
    """Trains `config`, printing the progress line (unless quiet) and the summary."""
    result = train(config, log=None if quiet else print)
    where = config.env.map if config.env.name == env_section.GRIDWORLD else config.env.name
    success = (
        f"success={result.success_rate:.3f} [{result.success_low:.3f}, "
        f"{result.success_high:.3f}] target={result.target:.3f} "
        if result.has_success
        else ""
    )
    print(
        f"{config.algorithm} on {where}: solved={result.solved} "
        f"env_steps={result.env_steps} updates={result.updates} episodes={result.episodes} "
        f"wall={result.wall_time:.2f}s (compile {result.compile_time:.2f}s, trained until "
        f"{result.trained_time:.3f}s, last call {_per_iteration(result.calls[-1])}) {success}"
        f"return={result.mean_return:+.2f} [{result.return_low:+.2f}, {result.return_high:+.2f}]"
        f"/{result.eval_episodes} target_return={result.target_return:g} "
        f"length={result.mean_length:.1f}"
    )
    if result.exact:
        print(reporting.describe_exact(result.exact))
    if result.report:
        print(result.report)
    return result


def _cli() -> None:
    """`python -m distrl.local --config=configs/ppo.py [--config.x.y=v ...] [--quiet]`."""
    from absl import flags  # noqa: PLC0415 - flags exist only when run as a program

    from distrl import cli  # noqa: PLC0415

    holder = cli.define_config("configs/dqn.py")
    quiet = flags.DEFINE_bool("quiet", False, "Print only the final summary.")

    def run(argv):
        del argv
        try:
            main(cli.load(holder), quiet.value)
        except config_lib.ConfigError as err:
            cli.fail(f"bad config: {err}")
        except EnvError as err:  # the env failed, or the policy acted non-finite: one line
            print(f"distrl: {err}", file=sys.stderr)
            sys.exit(1)

    cli.run(run)


if __name__ == "__main__":
    _cli()
