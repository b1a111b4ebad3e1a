"""Part of an env's observation hidden from the agent: a task that needs memory made
from one that does not (`config.env.hidden_observation`; e.g. the masked CartPole of
configs/ppo_masked_cartpole.py is gymnax CartPole-v1 with its two velocities, elements
1 and 3, hidden).

The wrapper drops the hidden elements of the flattened observation everywhere the agent
could see them (`reset`, `step`, `observe`), so every caller of the interface, the
actors, the evaluator and the single-process trainer alike, sees the same thing. It
forwards no optional capability: tables and grids describe the full observation.
"""

import dataclasses

import jax.numpy as jnp
import numpy as np

from distrl.envs.interface import Environment, EnvSpec


@dataclasses.dataclass(frozen=True)
class HiddenObservation:
    """`inner` with the flat observation elements `hidden` removed (hashable: a static
    jit argument, like the envs it wraps)."""

    inner: Environment
    hidden: tuple  # indices into the flattened observation, sorted

    @property
    def kept(self) -> np.ndarray:
        return np.setdiff1d(np.arange(self.inner.spec.obs_size), self.hidden)

    @property
    def spec(self) -> EnvSpec:
        return self.inner.spec._replace(observation_shape=(len(self.kept),))

    def _visible(self, observation):
        return jnp.reshape(observation, (-1,))[self.kept]

    def observe(self, state):
        return self._visible(self.inner.observe(state))

    def reset(self, key):
        state, ts = self.inner.reset(key)
        return state, ts._replace(observation=self._visible(ts.observation))

    def step(self, state, action, key):
        state, ts = self.inner.step(state, action, key)
        return state, ts._replace(observation=self._visible(ts.observation))


def hide(env: Environment, hidden) -> Environment:
    """`env` with the flat observation elements `hidden` removed; ValueError naming what
    is valid when an index is not one of them, repeats, or none would be left."""
    size = env.spec.obs_size
    bad = [i for i in hidden if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < size]
    if bad:
        raise ValueError(
            f"{bad} are not elements of the observation; need integers 0 .. {size - 1}"
        )
    if len(set(hidden)) != len(hidden):
        raise ValueError(f"{tuple(hidden)} repeats an element")
    if len(hidden) >= size:
        raise ValueError(f"hides all {size} elements of the observation; keep at least one")
    return HiddenObservation(env, tuple(sorted(hidden)))
