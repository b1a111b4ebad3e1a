"""A user's own environment module, as `--config.env.name=tests.user_envs:make_contexts`
loads it: a JAX env with no optional capability, and factories that fail in each way
the config must report."""

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp

from distrl import envs, spaces


class ContextState(NamedTuple):
    context: jax.Array  # int32 []: the action that pays this step
    t: jax.Array  # int32 []


@dataclasses.dataclass(frozen=True)
class Contexts:
    """A contextual bandit in episodes: each step shows one of `contexts` one-hot
    contexts; the action equal to it earns 1, any other 0. No termination: every
    episode is truncated after `length` steps, so the best return is `length`."""

    contexts: int = 3
    length: int = 4

    @property
    def spec(self) -> envs.EnvSpec:
        return envs.EnvSpec((self.contexts,), "float32", self.contexts, self.length)

    def observe(self, state):
        return jax.nn.one_hot(state.context, self.contexts)

    def reset(self, key):
        state = ContextState(jax.random.randint(key, (), 0, self.contexts), jnp.int32(0))
        return state, envs.timestep(self.observe(state), 0.0, False, False)

    def step(self, state, action, key):
        reward = jnp.where(action == state.context, 1.0, 0.0)
        state = ContextState(jax.random.randint(key, (), 0, self.contexts), state.t + 1)
        return state, envs.timestep(self.observe(state), reward, False, state.t >= self.length)


def make_contexts(contexts: int = 3, length: int = 4) -> Contexts:
    return Contexts(contexts, length)


def raising(**kwargs):
    raise ValueError(f"no such setting: {kwargs}")


def not_an_env():
    return {"spec": None}


def unhashable():
    return _Unhashable()


class _Unhashable(Contexts):
    __hash__ = None  # a jit cannot take it as a static argument


NOT_CALLABLE = 3


@dataclasses.dataclass(frozen=True)
class Target:
    """A continuous bandit in episodes: each step shows a target in [low, high] per
    action element; the reward is minus the squared distance of the action to it.
    The best return is 0; a policy ignoring the observation earns about -(range^2)/6
    per element and step."""

    shape: tuple = (1,)
    low: float = -2.0
    high: float = 2.0
    length: int = 4

    @property
    def spec(self) -> envs.EnvSpec:
        box = spaces.box(self.shape, self.low, self.high)
        return envs.EnvSpec(self.shape, "float32", 0, self.length, box)

    def observe(self, state):
        return state[0]

    def reset(self, key):
        target = jax.random.uniform(key, self.shape, minval=self.low, maxval=self.high)
        state = (target, jnp.int32(0))
        return state, envs.timestep(target, 0.0, False, False)

    def step(self, state, action, key):
        target, t = state
        reward = -jnp.sum(jnp.square(action - target))
        new = (jax.random.uniform(key, self.shape, minval=self.low, maxval=self.high), t + 1)
        return new, envs.timestep(new[0], reward, False, new[1] >= self.length)


def make_target(shape=(1,), low: float = -2.0, high: float = 2.0, length: int = 4) -> Target:
    """The Target env; its Box is built here, so bounds it refuses fail the factory."""
    env = Target(tuple(shape), float(low), float(high), length)
    env.spec  # noqa: B018 - a Box of infinite bounds is refused here
    return env


@dataclasses.dataclass(frozen=True)
class Clock:
    """Episodes of `length` steps whose observation is the step of the episode (0 at the
    reset), so a policy can act on it; one action element in [-1, 1], reward -a^2. A
    known place to act NaN at: a non-finite action's copy and step. With `nan_reward`
    every reward is NaN: the first update makes the params, and so the actions, NaN."""

    length: int = 5
    nan_reward: bool = False

    @property
    def spec(self) -> envs.EnvSpec:
        return envs.EnvSpec((1,), "float32", 0, self.length, spaces.box((1,), -1.0, 1.0))

    def observe(self, state):
        return state.astype(jnp.float32)[None]

    def reset(self, key):
        state = jnp.int32(0)
        return state, envs.timestep(self.observe(state), 0.0, False, False)

    def step(self, state, action, key):
        state = state + 1
        reward = -jnp.sum(jnp.square(action)) + (jnp.nan if self.nan_reward else 0.0)
        return state, envs.timestep(self.observe(state), reward, False, state >= self.length)


def make_clock(length: int = 5, nan_reward: bool = False) -> Clock:
    return Clock(int(length), bool(nan_reward))
