"""A user's own gymnasium envs, as `--config.env.name=tests.gym_envs:<name>` loads them: a
fixed-episode env for known answers, one that learns like a bandit, and one that
fails in each way an env can (raise, hang, wrong shape or dtype)."""

import os
import time

import gymnasium
import numpy as np
from gymnasium import spaces


class Countdown(gymnasium.Env):
    """A fixed episode: the observation is [t] (t steps taken), each step pays t, and
    the episode terminates after `length` steps (the action changes nothing)."""

    def __init__(self, length: int = 3):
        self.length = length
        self.observation_space = spaces.Box(0.0, 1e6, (1,), np.float32)
        self.action_space = spaces.Discrete(2)
        self._t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._t = 0
        return np.array([0.0], np.float32), {}

    def step(self, action):
        self._t += 1
        obs = np.array([self._t], np.float32)
        return obs, float(self._t), self._t == self.length, False, {}


def countdown(length: int = 3, limit: int = 10) -> gymnasium.Env:
    """Countdown(length) truncated after `limit` steps (a limit below length truncates)."""
    return gymnasium.wrappers.TimeLimit(Countdown(length), max_episode_steps=limit)


class Guess(gymnasium.Env):
    """One step per episode: the observation is one of `n` Discrete contexts, the action
    equal to it pays 1, any other 0 (the best return is 1). Registered time limit 1
    through `max_episode_steps` of TimeLimit."""

    def __init__(self, n: int = 3):
        self.observation_space = spaces.Discrete(n)
        self.action_space = spaces.Discrete(n)
        self._context = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._context = int(self.np_random.integers(self.observation_space.n))
        return self._context, {}

    def step(self, action):
        reward = float(int(action) == self._context)
        return self._context, reward, True, False, {}


def guess(n: int = 3) -> gymnasium.Env:
    return gymnasium.wrappers.TimeLimit(Guess(n), max_episode_steps=1)


class Faulty(Countdown):
    """Countdown(1000) that fails at its `fail_at`-th step since it was made: `how` is
    "raise", "hang", "shape" (an observation of shape (2,)) or "dtype" (float64). With
    `once_file`, only the first process to get there fails (it creates the file), so a
    restarted actor's fresh envs run on."""

    def __init__(self, how: str = "raise", fail_at: int = 50, once_file: str = ""):
        super().__init__(length=1000)
        self.how, self.fail_at, self.once_file = how, fail_at, once_file
        self._steps = 0

    def step(self, action):
        self._steps += 1
        obs, reward, terminated, truncated, info = super().step(action)
        if self._steps != self.fail_at or not self._first():
            return obs, reward, terminated, truncated, info
        if self.how == "raise":
            raise ValueError("the simulator lost its state")
        if self.how == "hang":
            time.sleep(3600)
        if self.how == "shape":
            obs = np.zeros(2, np.float32)
        if self.how == "dtype":
            obs = obs.astype(np.float64)
        return obs, reward, terminated, truncated, info

    def _first(self) -> bool:
        if not self.once_file:
            return True
        try:
            os.close(os.open(self.once_file, os.O_CREAT | os.O_EXCL))
        except FileExistsError:
            return False
        return True


def faulty(how: str = "raise", fail_at: int = 50, once_file: str = "") -> gymnasium.Env:
    return gymnasium.wrappers.TimeLimit(Faulty(how, fail_at, once_file), max_episode_steps=20)


class NoLimit(Countdown):
    """An env without a time limit (refused: an evaluation episode must end)."""


class Continuous(Countdown):
    """Box actions without finite bounds (refused: a policy's [-1, 1] scales onto none)."""

    def __init__(self):
        super().__init__()
        self.action_space = spaces.Box(-np.inf, np.inf, (1,), np.float32)


def continuous() -> gymnasium.Env:
    return gymnasium.wrappers.TimeLimit(Continuous(), max_episode_steps=5)
