"""A user's own environment, built by name: `module.path:factory` with keyword arguments
(or `gymnax:<id>`, gymnax's env of that id: `envs/gymnax_env.py`; or `gymnasium:<id>`,
an env stepped in Python: `envs/host_env.py`).

A factory may return a JAX env of the interface, a gymnax-style env (a gymnax
`Environment`, or the `(env, params)` pair `gymnax.make` returns) or a `gymnasium.Env`
(a subclass named directly is a factory too): distrl tells them apart by what it
returns; a gymnax-style env becomes a `gymnax_env.GymnaxEnv` and a gymnasium env a
`host_env.HostEnv`, each made again by name in every process.

`build("mypkg.envs:make", {"size": 8})` imports `mypkg.envs`, calls `make(size=8)` and
checks that the answer is an environment of the interface (`envs.interface`) that a
jit can take as a static argument (hashable) and whose spec the data path can size.
Every way that fails is a `FactoryError` naming the name and what went wrong, so the
config can refuse the run before any node starts.
"""

import importlib
import json

import numpy as np

from distrl import pyenv, spaces
from distrl.envs import gymnax_env, host_env
from distrl.envs.interface import Environment, EnvSpec


class FactoryError(ValueError):
    """A factory name or its keyword arguments that cannot build an environment."""


def is_factory_name(name: str) -> bool:
    """True for a name of the form `module.path:attribute`."""
    return isinstance(name, str) and name.count(":") == 1 and all(name.split(":"))


def parse_kwargs(text: str) -> dict:
    """The factory's keyword arguments from their JSON text ('' or '{}': none)."""
    if not text.strip():
        return {}
    try:
        kwargs = json.loads(text)
    except ValueError as err:
        raise FactoryError(f"not valid JSON ({err})") from None
    if not isinstance(kwargs, dict):
        raise FactoryError(f"need a JSON object of keyword arguments, got {text!r}")
    return kwargs


def resolve(name: str):
    """The callable `name` ('module.path:attribute') names."""
    if not is_factory_name(name):
        raise FactoryError("need 'module.path:factory' (e.g. mypkg.envs:make) or 'gridworld'")
    module_name, attribute = name.split(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise FactoryError(f"cannot import {module_name} ({err})") from None
    factory = getattr(module, attribute, None)
    if factory is None:
        raise FactoryError(f"module {module_name} has no attribute {attribute!r}")
    if not callable(factory):
        raise FactoryError(
            f"{attribute} in {module_name} is a {type(factory).__name__}, not callable"
        )
    return factory


def build(name: str, kwargs: dict) -> Environment:
    """The env `name`'s factory returns for `kwargs`, checked (FactoryError); a name
    'gymnax:<id>' is gymnax's env of that id, its params overridden by `kwargs`."""
    if name.startswith(gymnax_env.PREFIX):
        return _gymnax(name[len(gymnax_env.PREFIX) :], kwargs)
    if name.startswith(pyenv.PREFIX):
        return _host(name, kwargs)
    factory = resolve(name)
    try:
        env = factory(**kwargs)
    except Exception as err:  # noqa: BLE001 - any failure of user code is reported by name
        raise FactoryError(f"the factory raised {type(err).__name__}: {err}") from None
    if not isinstance(env, Environment):
        if host_env.is_gymnasium_env(env):
            env.close()  # each process makes its own copies by name
            return _host(name, kwargs)
        pair = gymnax_env.pair_of(env)
        if pair is not None:
            try:
                return gymnax_env.adopt(name, kwargs, pair)
            except ValueError as err:
                raise FactoryError(str(err)) from None
    check(env)
    return env


def _host(name: str, kwargs: dict) -> host_env.HostEnv:
    try:
        return host_env.make(name, kwargs)
    except host_env.FactoryError as err:
        raise FactoryError(str(err)) from None


def _gymnax(env_id: str, kwargs: dict) -> Environment:
    try:
        return gymnax_env.make(env_id, **kwargs)
    except ImportError as err:
        raise FactoryError(
            f"cannot import gymnax ({err}); it is pinned in requirements.lock: run make setup"
        ) from None
    except (ValueError, TypeError) as err:
        raise FactoryError(str(err)) from None


def check(env) -> None:
    """FactoryError unless `env` is an environment the data path can take."""
    kind = type(env).__name__
    if not isinstance(env, Environment):
        raise FactoryError(
            f"returned a {kind}, not an environment: need spec, reset, step and observe "
            f"(distrl.envs.interface), a gymnax Environment or the (env, params) pair "
            f"gymnax.make returns, or a gymnasium.Env"
        )
    try:
        hash(env)
    except TypeError:
        raise FactoryError(
            f"returned an unhashable {kind}; a jit takes the env as a static argument: "
            f"make it a frozen dataclass or a NamedTuple"
        ) from None
    spec = env.spec
    ok = (
        isinstance(spec, EnvSpec)
        and all(isinstance(d, int) and d >= 1 for d in spec.observation_shape)
        and isinstance(spec.num_actions, int)
        and (spec.num_actions >= 1 or isinstance(spec.action_space, spaces.Box))
        and isinstance(spec.action_space, (spaces.Box, spaces.Discrete, type(None)))
        and isinstance(spec.time_limit, int)
        and spec.time_limit >= 1
    )
    if not ok:
        raise FactoryError(
            f"{kind}.spec={spec!r}: need an envs.EnvSpec with positive int observation dims, "
            f"num_actions (or an action_space, a distrl.spaces.Box or Discrete) and time_limit"
        )
    try:
        np.dtype(spec.observation_dtype)
    except TypeError:
        raise FactoryError(
            f"{kind}.spec.observation_dtype={spec.observation_dtype!r} is not a numpy dtype"
        ) from None
