"""gymnax environments as envs of the interface: `config.env.name=gymnax:<id>`
(`CartPole-v1`, `Acrobot-v1`, the MinAtar games, any id gymnax registers).

gymnax's own `step` resets in place and returns the reset observation; the data path
needs the observation reached (a truncated episode bootstraps from it) and resets
itself (`interface.auto_reset_step`). So the adapter calls gymnax's `step_env` (one
transition, no reset) and `reset_env`, and reads the two ends apart: `step_env`'s
done flag is the natural termination only (gymnax >= 1.0 keeps time limits out of
it) and `is_truncated` is the time limit (`max_steps_in_episode`); a step that is
both counts as terminated (no bootstrap), as `interface.timestep` encodes it.

The wrapper holds only the id and the parameter overrides, so it is hashable (a
static jit argument) and equal across processes; the gymnax object is built once
per process (`_gymnax`). gymnax is imported on first use: the rest of distrl does
not need it.
"""

import dataclasses
import functools
from typing import Any, NamedTuple

import jax
import numpy as np

from distrl import spaces
from distrl.envs.interface import EnvSpec, timestep

PREFIX = "gymnax:"  # config.env.name = PREFIX + a gymnax id


class GymnaxState(NamedTuple):
    inner: Any  # gymnax's env state
    observation: jax.Array  # the observation of `inner` (gymnax has no one observe signature)


@functools.cache
def _gymnax(env_id: str, overrides: tuple):
    """(gymnax env, its params with `overrides` applied), once per process."""
    import gymnax  # noqa: PLC0415 - optional; imported only for a gymnax env

    if env_id not in gymnax.registered_envs:
        valid = ", ".join(sorted(gymnax.registered_envs))
        raise ValueError(f"gymnax has no env {env_id!r}; valid: {valid}")
    env, params = gymnax.make(env_id)
    fields = {f.name for f in dataclasses.fields(params)}
    unknown = sorted(set(dict(overrides)) - fields)
    if unknown:
        raise ValueError(f"{env_id} params have no {unknown}; valid: {sorted(fields)}")
    return env, params.replace(**dict(overrides))


@dataclasses.dataclass(frozen=True)
class GymnaxEnv:
    """One gymnax env by id, its params overridden by `overrides` ((name, value), ...)."""

    env_id: str
    overrides: tuple = ()

    @property
    def spec(self) -> EnvSpec:
        env, params = _gymnax(self.env_id, self.overrides)
        space = env.observation_space(params)
        actions = action_space(env.action_space(params))
        discrete = isinstance(actions, spaces.Discrete)
        return EnvSpec(
            observation_shape=tuple(int(d) for d in space.shape),
            observation_dtype=np.dtype(space.dtype).name,
            num_actions=actions.n if discrete else 0,
            time_limit=int(params.max_steps_in_episode),
            action_space=None if discrete else actions,  # None: Discrete(num_actions)
        )

    def observe(self, state: GymnaxState) -> jax.Array:
        return state.observation

    def reset(self, key):
        env, params = _gymnax(self.env_id, self.overrides)
        obs, inner = env.reset_env(key, params)
        obs = obs.astype(self.spec.observation_dtype)
        return GymnaxState(inner, obs), timestep(obs, 0.0, False, False)

    def step(self, state: GymnaxState, action, key):
        env, params = _gymnax(self.env_id, self.overrides)
        obs, inner, reward, terminated, _ = env.step_env(key, state.inner, action, params)
        truncated = env.is_truncated(inner, params)
        obs = obs.astype(self.spec.observation_dtype)
        return GymnaxState(inner, obs), timestep(obs, reward, terminated, truncated)


def action_space(space) -> spaces.Discrete | spaces.Box:
    """gymnax's action space as distrl's: its Discrete (`n`) or its Box
    (ValueError for infinite bounds or any other kind)."""
    kind = type(space).__name__
    if kind == "Discrete":
        return spaces.Discrete(int(space.n))
    if kind == "Box":
        return spaces.box(space.shape, np.asarray(space.low), np.asarray(space.high))
    raise ValueError(f"action space {kind}: need a Discrete or a Box")


def make(env_id: str, **overrides) -> GymnaxEnv:
    """The gymnax env `env_id` (ValueError for an unknown id or parameter; ImportError
    without gymnax), its default params overridden by `overrides`."""
    env = GymnaxEnv(env_id, tuple(sorted(overrides.items())))
    _gymnax(env.env_id, env.overrides)  # fail here, not inside a jit
    env.spec  # noqa: B018 - likewise an action space distrl cannot take
    return env
