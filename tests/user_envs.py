"""A user's own environment module, as `--config.env.name=tests.user_envs:make_contexts`
loads it: a JAX env with no optional capability, and factories that fail in each way
the config must report."""

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp

from distrl import envs


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
