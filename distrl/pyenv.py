"""Environments stepped in Python (gymnasium), on the side that needs no JAX: making one
env by name, and the wrapper that names it and the step in every failure.

`distrl.envs.host_env` turns such an env into a spec and capabilities for the data
path; the actors and the evaluator step copies of it through a gymnasium vector env
(`distrl.acting.host_rollout`). The copies are made here, by name, so that a subprocess of
`AsyncVectorEnv` (forked by a forkserver) unpickles only `make_checked`'s arguments and
imports gymnasium and numpy, not JAX (this module imports nothing of distrl's).

A name is `gymnasium:<id>` (`gymnasium.make(id, **kwargs)`; `max_episode_steps` in
kwargs sets the time limit as `gymnasium.make` does) or `module.path:attribute`, a
`gymnasium.Env` subclass or a function returning one, called with kwargs.
"""

import ctypes
import importlib
import json
import math
import os
import select
import signal
import threading
import time

import gymnasium
import numpy as np

PREFIX = "gymnasium:"  # config.env.name = PREFIX + a registered gymnasium id


class EnvError(RuntimeError):
    """An env stepped in Python that raised, hung or returned what its spaces do not
    allow, or any env given a non-finite action (a JAX env's: `nodes.actor`); the
    message is one line naming the env, its copy and the step."""


def make_raw(name: str, kwargs_json: str) -> gymnasium.Env:
    """The env `name` names, made with the keyword arguments of `kwargs_json`."""
    kwargs = json.loads(kwargs_json or "{}")
    if name.startswith(PREFIX):
        return gymnasium.make(name[len(PREFIX) :], **kwargs)
    module, attribute = name.split(":")
    return getattr(importlib.import_module(module), attribute)(**kwargs)


def make_checked(name: str, kwargs_json: str, index: int) -> "Checked":
    """Copy `index` of the env `name`, checked (picklable by its arguments)."""
    return Checked(make_raw(name, kwargs_json), name, index)


_PR_SET_PDEATHSIG = 1


def async_worker(owner: int, *args) -> None:
    """gymnasium's subprocess worker of `AsyncVectorEnv`, for a copy stepped by process
    `owner`: killed with its parent, the forkserver, and ended once `owner` has exited
    (the forkserver lives on while any copy holds its pipe, so after a kill -9 of
    `owner` a copy busy in a step would otherwise run on, and the forkserver with it)."""
    from gymnasium.vector.async_vector_env import _async_worker  # noqa: PLC0415

    ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    _end_with(owner)
    _async_worker(*args)


def _end_with(pid: int) -> None:
    """A daemon thread that ends this process as soon as process `pid` exits (a pidfd
    becomes readable then, zombie or not; polled each second where pidfds are missing)."""
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        fd = None

    def watch():
        if fd is not None:
            select.select([fd], [], [])
        else:
            while _alive(pid):
                time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=watch, daemon=True, name=f"ends with {pid}").start()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def time_limit(env: gymnasium.Env):
    """The steps after which `env` truncates an episode (its TimeLimit), or None."""
    while True:
        if isinstance(env, gymnasium.wrappers.TimeLimit):
            return int(env._max_episode_steps)
        spec = getattr(env, "spec", None)
        if spec is not None and spec.max_episode_steps:
            return int(spec.max_episode_steps)
        if not isinstance(env, gymnasium.Wrapper):
            return None
        env = env.env


def observation_problem(space: gymnasium.Space, obs):
    """What is wrong with `obs` for `space` (Box: shape and dtype exactly; Discrete: an
    integer in range), or None."""
    if isinstance(space, gymnasium.spaces.Discrete):
        value = np.asarray(obs)
        ok = value.shape == () and np.issubdtype(value.dtype, np.integer)
        if ok and space.start <= int(value) < space.start + space.n:
            return None
        return f"observation {obs!r}; its space {space} needs one integer in range"
    array = obs if isinstance(obs, np.ndarray) else None
    if array is None:
        return f"observation of type {type(obs).__name__}; its space {space} needs a numpy array"
    if array.shape != space.shape or array.dtype != space.dtype:
        return (
            f"observation of shape {array.shape} and dtype {array.dtype}; its space needs "
            f"shape {space.shape} and dtype {space.dtype}"
        )
    return None


class Checked(gymnasium.Wrapper):
    """Copy `index` of env `name`: any exception of the env, and an observation, reward or
    end flag its spaces do not allow, becomes one `EnvError` naming the env, the copy
    and the step (this copy's steps since it was made, and the step of its episode).

    The checks stay per copy (a vector env's batch does not show a wrong dtype, shape
    or type: it casts into its buffers), but a step whose values are what they should
    be passes on a few type and attribute tests (`_fine`); only a suspect one goes
    through the full checks that write the message."""

    def __init__(self, env: gymnasium.Env, name: str, index: int):
        super().__init__(env)
        self._name, self._index = name, index
        self.steps, self.episode_step = 0, 0
        self._space = space = env.observation_space
        self._box = self._range = None  # the space's shape and dtype, or its integers
        if isinstance(space, gymnasium.spaces.Box):
            self._box = (space.shape, space.dtype)
        elif isinstance(space, gymnasium.spaces.Discrete):
            self._range = (int(space.start), int(space.start + space.n))
        actions = env.action_space  # a Box's bounds: an action outside them is refused
        self._action_bounds = None
        if isinstance(actions, gymnasium.spaces.Box):
            self._action_bounds = (actions.low, actions.high)

    def _where(self) -> str:
        return (
            f"env {self._name} (copy {self._index}) at step {self.steps} "
            f"(step {self.episode_step} of its episode)"
        )

    def _fail(self, what: str):
        raise EnvError(f"{self._where()}: {what}")

    def reset(self, *, seed=None, options=None):
        try:
            obs, info = self.env.reset(seed=seed, options=options)
        except Exception as err:  # noqa: BLE001 - any failure of user code is named
            self._fail(f"reset raised {type(err).__name__}: {_one_line(err)}")
        self.episode_step = 0
        problem = observation_problem(self._space, obs)
        if problem:
            self._fail(f"reset returned an {problem}")
        return obs, info

    def step(self, action):
        self.steps += 1
        self.episode_step += 1
        bounds = self._action_bounds
        if bounds is not None and not (
            np.all(np.isfinite(action))
            and np.all(bounds[0] <= action)
            and np.all(action <= bounds[1])
        ):
            self._fail(
                f"got action {np.asarray(action).tolist()}; need finite values within "
                f"[{bounds[0].tolist()}, {bounds[1].tolist()}] (the action space)"
            )
        try:
            obs, reward, terminated, truncated, info = self.env.step(action)
        except Exception as err:  # noqa: BLE001 - any failure of user code is named
            self._fail(f"step raised {type(err).__name__}: {_one_line(err)}")
        if not self._fine(obs, reward, terminated, truncated):
            self._check(obs, reward, terminated, truncated)
        return obs, reward, terminated, truncated, info

    def _fine(self, obs, reward, terminated, truncated) -> bool:
        """True for a step whose values pass every check (the common case, fast)."""
        box = self._box
        if box is not None:
            if type(obs) is not np.ndarray or obs.shape != box[0] or obs.dtype != box[1]:
                return False
        else:
            bounds = self._range
            if bounds is None or type(obs) not in _INTEGERS or not bounds[0] <= obs < bounds[1]:
                return False
        if type(reward) not in _REWARDS or not math.isfinite(reward):
            return False
        return type(terminated) in _FLAGS and type(truncated) in _FLAGS

    def _check(self, obs, reward, terminated, truncated) -> None:
        problem = observation_problem(self._space, obs)
        if problem:
            self._fail(f"step returned an {problem}")
        if not isinstance(reward, (int, float, np.number)) or not math.isfinite(float(reward)):
            self._fail(f"step returned reward {reward!r}; need a finite number")
        for flag, value in (("terminated", terminated), ("truncated", truncated)):
            if not isinstance(value, (bool, np.bool_)):
                self._fail(f"step returned {flag}={value!r}; need a bool")


_REWARDS = (float, int, np.float32, np.float64)  # the common exact types (`_fine`)
_FLAGS = (bool, np.bool_)
_INTEGERS = (int, np.int64, np.int32)


def _one_line(err: Exception) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else "(no message)"
