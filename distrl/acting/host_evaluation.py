"""Evaluation episodes of an env stepped in Python (gymnasium): `evaluation.make_evaluator`'s
contract, `evaluate(params, key, epsilon=0.0) -> EvalResult`, played on the host.

N episodes are played on W = min(N, 256) copies in one synchronous vector env
(`host_rollout.VectorStepper`: checked copies, the step deadline; in the evaluator's
own process whatever config.env.vector says for the actors), copy i playing
exactly its share of the N (N // W, one more for the first N mod W), each from a
reset, so long episodes weigh as much as short ones. The figures are
`evaluation.summarize`'s: the mean return with its 95% interval, and the success
rate with its Wilson interval where the env has a success signal. No episode is
taken as exact (an env stepped in Python declares no determinism). Each step's
actions are checked before the env steps, as a JAX env's evaluation checks them
(`rollout.check_actions`): a non-finite one (diverged params) is an `EnvError`
naming the env, the evaluation, the copy and the step.
"""

import jax
import numpy as np

from distrl import envs
from distrl.acting import evaluation, host_rollout, intervals, rollout

WIDTH = 256  # copies in an evaluator's vector env, at most


class HostEvaluator:
    """`evaluate(params, key, epsilon=0.0) -> EvalResult` over `num_episodes` episodes."""

    def __init__(self, env, agent, num_episodes: int, greedy: bool, config):
        self._n = num_episodes
        self._stepper = host_rollout.VectorStepper(
            env, min(num_episodes, WIDTH), host_rollout.SYNC, config.env.step_timeout_s
        )
        self._act = jax.jit(_checked(evaluation.make_act(agent, greedy)))
        self._success = envs.success_signal(env)
        self._env_name = config.env.name

    def __call__(self, params, key, epsilon=0.0) -> intervals.EvalResult:
        return evaluation.summarize(self.play(params, key, epsilon))

    def play(self, params, key, epsilon=0.0) -> evaluation.Episodes:
        """`num_episodes` whole episodes -> `evaluation.Episodes` (numpy)."""
        w = self._stepper.num_envs
        quota = np.full(w, self._n // w) + (np.arange(w) < self._n % w)
        key, reset_key = jax.random.split(key)
        obs = self._stepper.reset(host_rollout.seed_of(reset_key))
        running_return, running_length = np.zeros(w, np.float32), np.zeros(w, np.int32)
        done = np.zeros(w, np.int64)
        success, returns, lengths = [], [], []
        steps = 0
        while np.any(done < quota):
            key, act_key = jax.random.split(key)
            actions, first = self._act(params, act_key, obs, epsilon)
            rollout.check_actions(first, self._env_name, evaluation.WHO, w, steps)
            actions = np.asarray(actions)
            steps += 1
            obs, reward, terminated, last, reached = self._stepper.step(actions)
            running_return += reward
            running_length += 1
            counted = last & (done < quota)
            if counted.any():
                returns.extend(running_return[counted])
                lengths.extend(running_length[counted])
                if self._success is not None:
                    discount = np.where(terminated, 0.0, 1.0).astype(np.float32)
                    ts = envs.TimeStep(reached, reward, discount, last)
                    success.extend(np.asarray(self._success(ts))[counted])
                else:
                    success.extend([False] * int(counted.sum()))
                done += counted
            running_return[last], running_length[last] = 0.0, 0
        return evaluation.Episodes(
            np.asarray(success, bool), np.asarray(returns, np.float32), np.asarray(lengths)
        )

    def close(self) -> None:
        self._stepper.close()


def _checked(act):
    """`act` that also returns the copy of its first non-finite action, -1 without one."""

    def checked(params, key, obs, epsilon):
        actions = act(params, key, obs, epsilon)
        return actions, rollout.first_true(rollout.nonfinite_actions(actions))

    return checked


def make_evaluator(env, agent, num_envs: int, greedy: bool, config):
    """`evaluation.make_evaluator` for either kind of env: a `HostEvaluator` for an env
    stepped in Python, else the jitted evaluator. Either raises `EnvError` for an action
    that is not finite (`rollout.check_actions`): the host evaluator checks each step's
    actions before its copies step, the jitted evaluator after its call."""
    if envs.is_host_env(env):
        return HostEvaluator(env, agent, num_envs, greedy, config)
    return evaluation.make_evaluator(env, agent, num_envs, greedy, env_name=config.env.name)
