"""The single-process trainer's loop for an env stepped in Python (gymnasium, or a
user's own `gymnasium.Env`): `distrl.local.train` runs it for such an env.

A jitted program cannot step these envs, so the loop is Python's: each iteration the
B copies take T steps (`host_rollout.HostAct.unroll`, the host-stepped actor's own
rollout, one jitted policy call per step), then the pipeline's data step
(`local_learn`, the very step the fused trainer runs for a JAX env: DQN, SAC and TD3
add to a replay buffer of JAX arrays and take their updates, on-policy agents update
on the chunk) runs as one jitted call, its buffer and state donated. Every
`eval_every` iterations the evaluator's host episodes (`host_evaluation`) judge the
policy, confirmed as the fused trainer confirms (`intervals.touches`). Budgets:
env steps, updates and seconds, checked each iteration. The policy always acts with
the newest params, as in the fused trainer.
"""

import functools
import time
from typing import Any, NamedTuple

import jax
import numpy as np

from distrl import agents, packing
from distrl.acting import host_evaluation, host_rollout, intervals


class HostRun(NamedTuple):
    """What the loop hands back to `distrl.local.train` (host values but `state`)."""

    state: agents.TrainingState
    env_steps: int
    iterations: int
    episodes: int
    evaluation: intervals.EvalResult  # the latest
    evaluated_at: int  # env steps at the latest evaluation (-1: none)
    history: tuple  # (env steps, seconds, exact success or nan) after each evaluation
    evaluations: tuple  # (env steps, seconds, mean return) of each evaluation
    calls: tuple  # (iterations, seconds) between evaluations
    compile_time: float  # seconds to the end of the first iteration (its step compiles)
    trained_time: float  # seconds from the start to the end of the last iteration


class _Evaluator:
    """Screens with `eval_envs` episodes and confirms with `confirm_envs` once the screen
    touches the targets, as the fused trainer's `_evaluate` does without a tabular model."""

    def __init__(self, experiment, cfg, target):
        env, agent, config = experiment.env, experiment.agent, experiment.config

        def make(n):
            return host_evaluation.HostEvaluator(env, agent, n, cfg.greedy, config)

        self.screen = make(cfg.eval_envs)
        self.confirm = self.screen if cfg.confirm_envs == cfg.eval_envs else make(cfg.confirm_envs)
        self._target, self._min = target, cfg.confirm_envs

    def __call__(self, params, key) -> intervals.EvalResult:
        screen_key, confirm_key = jax.random.split(key)
        result = jax.device_get(self.screen(params, screen_key))
        if intervals.touches(result, self._target[0], self._min, self._target[1]):
            result = jax.device_get(self.confirm(params, confirm_key))
        return result

    def close(self) -> None:
        self.screen.close()
        if self.confirm is not self.screen:
            self.confirm.close()


def run(experiment, cfg, target: tuple, key, start: float, show=None, judge=None) -> HostRun:
    """Trains until the targets are confirmed or a budget ends (see the module docstring).

    cfg: `distrl.local.Settings`; target: (success, mean return), 0 where none.
    show(evaluation, answer, env steps, updates, seconds, (env steps/s, updates/s)) after
    each evaluation; judge(params) -> `exact_check.exact_answer` or None."""
    env, agent, config = experiment.env, experiment.agent, experiment.config
    pipeline = experiment.pipeline
    init_key, data_key, reset_key, key = jax.random.split(key, 4)
    state = jax.jit(agent.init)(init_key)
    _, data, env_steps = pipeline.local_init(env, agent, cfg, state, None, data_key)
    learn = jax.jit(functools.partial(pipeline.local_learn, agent, cfg), donate_argnums=(0, 1))
    epsilon = jax.jit(agent.epsilon)
    stepper = host_rollout.VectorStepper(
        env, cfg.num_envs, config.env.vector, config.env.step_timeout_s
    )
    act = host_rollout.HostAct(stepper, agent.policy, cfg.rollout_length, packing.OnHost(_chunk))
    evaluate = _Evaluator(experiment, cfg, target)
    try:
        carry = act.init_carry(host_rollout.seed_of(reset_key))
        loop = _Loop(act, learn, epsilon, evaluate, cfg, target, show, judge)
        return loop.run(carry, state, data, env_steps, key, start)
    finally:
        act.close()
        evaluate.close()


def _chunk(tail, chunk):
    """The item function HostAct asks for; the loop takes its chunks from `unroll`."""
    return chunk, tail


class _Loop:
    """The iterations (see the module docstring); `run` returns the `HostRun`."""

    def __init__(self, act, learn, epsilon, evaluate, cfg, target, show, judge):
        self.act, self.learn, self.epsilon, self.evaluate = act, learn, epsilon, evaluate
        self.cfg, self.target, self.show, self.judge = cfg, target, show, judge

    def run(self, carry, state, data, env_steps, key, start) -> HostRun:
        cfg, target = self.cfg, self.target
        ev = intervals.EvalResult(*[np.float32(0)] * len(intervals.EvalResult._fields))
        evaluated_at, iterations, episodes, compile_time = -1, 0, 0, 0.0
        history, evaluations, calls = [], [], []
        since = (time.perf_counter(), iterations, env_steps, 0)  # the last evaluation's
        while _within_budget(cfg, env_steps, state, time.perf_counter() - start):
            roll_key, learn_key, eval_key = jax.random.split(jax.random.fold_in(key, iterations), 3)
            chunk, stats = self.act.unroll(state.params, carry, roll_key, self.epsilon(env_steps))
            state, data = self.learn(state, data, chunk, learn_key)
            if not iterations:
                jax.block_until_ready(state)
                compile_time = time.perf_counter() - start
            env_steps += int(stats.env_steps)
            episodes += int(stats.episodes)
            iterations += 1
            if iterations % cfg.eval_every:
                continue
            ev = self.evaluate(state.params, eval_key)
            now, updates = time.perf_counter(), int(state.step)
            elapsed, took = now - start, now - since[0]
            evaluated_at = env_steps
            answer = self.judge(state.params) if self.judge else None
            history.append((env_steps, elapsed, answer["success"] if answer else np.nan))
            evaluations.append((env_steps, elapsed, float(ev.mean_return)))
            calls.append((iterations - since[1], took))
            if self.show:
                rates = ((env_steps - since[2]) / took, (updates - since[3]) / took)
                self.show(ev, answer, env_steps, updates, elapsed, rates)
            since = (now, iterations, env_steps, updates)
            if intervals.confirmed(ev, target[0], cfg.confirm_envs, target[1]):
                break
        jax.block_until_ready(state)
        now = time.perf_counter()
        if iterations > since[1]:
            calls.append((iterations - since[1], now - since[0]))
        return HostRun(
            state,
            env_steps,
            iterations,
            episodes,
            ev,
            evaluated_at,
            tuple(history),
            tuple(evaluations),
            tuple(calls),
            compile_time,
            trained_time=now - start,
        )


def _within_budget(cfg, env_steps: int, state, elapsed: float) -> bool:
    """Another iteration may start: env steps, updates and seconds all left (the update
    count read off the device only with an update budget)."""
    return (
        env_steps < cfg.max_env_steps
        and not 0 < cfg.max_seconds <= elapsed
        and not (cfg.max_updates and int(state.step) >= cfg.max_updates)
    )


def final_evaluation(experiment, cfg, run: HostRun, key) -> Any:
    """The last policy's figures: the latest evaluation when it judged the final params
    with `confirm_envs` episodes, else a fresh one of `confirm_envs` episodes."""
    if run.evaluated_at == run.env_steps and run.evaluation.episodes >= cfg.confirm_envs:
        return run.evaluation
    env, agent, config = experiment.env, experiment.agent, experiment.config
    evaluate = host_evaluation.HostEvaluator(env, agent, cfg.confirm_envs, cfg.greedy, config)
    try:
        return jax.device_get(evaluate(run.state.params, key))
    finally:
        evaluate.close()
