"""gymnax environments as envs of the interface: `config.env.name=gymnax:<id>`
(`CartPole-v1`, `Acrobot-v1`, the MinAtar games, any id gymnax registers), and a
user's own gymnax-style env through `module.path:factory` (`adopt`): a factory that
returns a `gymnax.environments.environment.Environment` (its `default_params` used)
or the `(env, params)` pair `gymnax.make` returns.

gymnax's own `step` resets in place and returns the reset observation; the data path
needs the observation reached (a truncated episode bootstraps from it) and resets
itself (`interface.auto_reset_step`). So the adapter calls gymnax's `step_env` (one
transition, no reset) and `reset_env`, and reads the two ends apart: `step_env`'s
done flag is the natural termination only (gymnax >= 1.0 keeps time limits out of
it) and `is_truncated` is the time limit (`max_steps_in_episode`); a step that is
both counts as terminated (no bootstrap), as `interface.timestep` encodes it.

The wrapper holds only the id and the parameter overrides (a user's env: the factory's
name and keyword arguments), so it is hashable (a static jit argument) and equal across
processes; the gymnax object is built once per process (`_gymnax`). gymnax is imported
on first use: the rest of distrl does not need it.
"""

import dataclasses
import importlib
import json
import numbers
from typing import Any, NamedTuple

import jax
import numpy as np

from distrl import spaces
from distrl.envs.interface import EnvSpec, timestep

PREFIX = "gymnax:"  # config.env.name = PREFIX + a gymnax id


class GymnaxState(NamedTuple):
    inner: Any  # gymnax's env state
    observation: jax.Array  # the observation of `inner` (gymnax has no one observe signature)


_MADE: dict = {}  # (env_id, overrides, kwargs) -> (gymnax env, params), once per process


def _gymnax(env_id: str, overrides: tuple, kwargs: str = ""):
    """(gymnax env, params): gymnax's env `env_id` with `overrides` applied, or what the
    factory `env_id` ('module.path:factory') returns for `kwargs` (JSON)."""
    key = (env_id, overrides, kwargs)
    if key not in _MADE:
        _MADE[key] = _by_factory(env_id, kwargs) if ":" in env_id else _by_id(env_id, overrides)
    return _MADE[key]


def _by_factory(name: str, kwargs: str):
    """The factory's answer as (env, params), in a process that has not called it yet
    (`envs.factory.build` checked the name and the answer in the first one)."""
    module, attribute = name.split(":")
    answer = getattr(importlib.import_module(module), attribute)(**json.loads(kwargs or "{}"))
    return pair_of(answer)


def pair_of(answer):
    """(env, params) of a factory's answer that is gymnax-style (a gymnax Environment:
    its default_params; or the (Environment, params) pair `gymnax.make` returns), else
    None. Without gymnax nothing is gymnax-style."""
    try:
        from gymnax.environments.environment import Environment  # noqa: PLC0415
    except ImportError:
        return None
    if isinstance(answer, Environment):
        return answer, answer.default_params
    if isinstance(answer, tuple) and len(answer) == 2 and isinstance(answer[0], Environment):
        return answer
    return None


def _by_id(env_id: str, overrides: tuple):
    """gymnax's env `env_id` and its params with `overrides` applied."""
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
    """One gymnax env by id, its params overridden by `overrides` ((name, value), ...);
    or a user's, `env_id` its factory's 'module.path:factory' and `kwargs` the factory's
    keyword arguments (canonical JSON)."""

    env_id: str
    overrides: tuple = ()
    kwargs: str = ""

    @property
    def spec(self) -> EnvSpec:
        env, params = self._made()
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

    def _made(self):
        return _gymnax(self.env_id, self.overrides, self.kwargs)

    def observe(self, state: GymnaxState) -> jax.Array:
        return state.observation

    def reset(self, key):
        env, params = self._made()
        obs, inner = env.reset_env(key, params)
        obs = obs.astype(self.spec.observation_dtype)
        return GymnaxState(inner, obs), timestep(obs, 0.0, False, False)

    def step(self, state: GymnaxState, action, key):
        env, params = self._made()
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


def adopt(name: str, kwargs: dict, pair) -> GymnaxEnv:
    """A user's gymnax-style env: `pair` (`pair_of` the factory `name`'s answer for
    `kwargs`) as an env of the interface that every process makes again by name.
    ValueError naming what is wrong: params without `max_steps_in_episode` (the time
    limit), an action space distrl cannot take, or reset_env/step_env that fail."""
    env, params = pair
    kind = type(env).__name__
    limit = getattr(params, "max_steps_in_episode", None)
    if not (isinstance(limit, numbers.Real) and limit >= 1 and int(limit) == limit):
        raise ValueError(
            f"{kind}'s params ({type(params).__name__}) have max_steps_in_episode={limit!r}: "
            f"need a whole number >= 1, the time limit (gymnax's EnvParams has it)"
        )
    wrapped = GymnaxEnv(name, kwargs=json.dumps(kwargs, sort_keys=True))
    made = (wrapped.env_id, wrapped.overrides, wrapped.kwargs)
    _MADE[made] = (env, params)  # not called again in this process
    try:
        spec = wrapped.spec
        state, _ = jax.eval_shape(wrapped.reset, jax.random.PRNGKey(0))
        action = jax.ShapeDtypeStruct(spec.actions.shape, spec.actions.dtype)
        jax.eval_shape(wrapped.step, state, action, jax.random.PRNGKey(0))
    except Exception as err:  # noqa: BLE001 - user code: any failure is named
        del _MADE[made]
        cause = f"{type(err).__name__}: {err}" if str(err) else type(err).__name__
        raise ValueError(
            f"{kind} is gymnax-style but raised {cause} (need reset_env, step_env, "
            f"action_space(params) and observation_space(params) as gymnax's Environment "
            f"has them, and a state with `time` for is_truncated)"
        ) from None
    return wrapped
