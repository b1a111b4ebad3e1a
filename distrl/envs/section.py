"""The experiment config's env section (`config.env`): the env it names, and its checks.

`make` builds the env of a section: the built-in gridworld from env.map, slippery,
time_limit and rewards (a map's size checked before it is drawn), or a factory's
(`factory`: 'module.path:function' with env.kwargs, 'gymnax:<id>', 'gymnasium:<id>').
`check_section` checks it against the env a run uses. Both raise ConfigError naming
the field; nothing here reads another section of the config. `section_defaults`
declares its fields with their defaults.
"""

import math
import re

from distrl import spaces
from distrl.envs import factory, gridworld, host_env, observation
from distrl.envs.interface import Environment
from distrl.errors import ConfigError, check

GRIDWORLD = "gridworld"  # config.env.name of the built-in env
MAX_TIME_LIMIT = 1_000_000  # env steps; an evaluation episode may last that long
# Cells of a map: a 1000x1000 random map takes a minute to draw and check, and its
# one-hot observations (8 MB per transition) fit no replay here.
MAX_MAP_CELLS = 250_000
VECTORS = ("sync", "async")  # env.vector: an actor's copies in its process, or a process each
# The env of an agent that acts only in Box actions (SAC, TD3) when the config names none.
BOX_DEFAULT = "gymnax:Pendulum-v1"


def section_defaults(agent_config) -> dict:
    """The env section's fields with their defaults (the env a preset starts on)."""
    takes_discrete = spaces.Discrete in type(agent_config).ACTION_SPACES
    return {
        "env": dict(
            # "gridworld" (the built-in, with the fields below) or a factory of your own,
            # 'module.path:function' (README, "Your own environment"), 'gymnax:<id>' or
            # 'gymnasium:<id>'; an agent of Box actions only (SAC, TD3) starts on Pendulum
            name=GRIDWORLD if takes_discrete else BOX_DEFAULT,
            kwargs="{}",  # the factory's keyword arguments as a JSON object (not the gridworld's)
            # envs stepped in Python ('gymnasium:<id>' or a factory returning a gymnasium.Env):
            vector="sync",  # an actor's B copies: "sync" in its process, "async": a process each
            step_timeout_s=60.0,  # a vector step slower than this fails the actor (0: no limit)
            # elements of the flat observation the agent never sees, e.g. (1, 3): CartPole's
            # velocities (a task that needs memory); a JAX env's only
            hidden_observation=(),
            # the gridworld's own fields:
            map="4x4",  # '4x4', '8x8', 'random:<rows>x<cols>:seed=<n>' or rows 'SFFF/FHFH/...'
            slippery=False,  # moves slip to either side with probability 1/3 each
            time_limit=0,  # env steps per episode; 0: the map's default (100 on 4x4, else 200)
            rewards=(1.0, -1.0, 0.0),  # reward of reaching G, of falling into H, of any other step
        )
    }


def make(section) -> Environment:
    """The env `section.name` names, less its `hidden_observation`; any failure to build
    it is a ConfigError naming it."""
    env = _named(section)
    hidden = tuple(section.hidden_observation)
    if not hidden:
        return env
    check(
        not host_env.is_host_env(env),
        f"config.env.hidden_observation={hidden}: {section.name!r} is stepped in Python; "
        f"only a JAX env (gymnax, the gridworld, a factory's) hides observation elements",
    )
    try:
        return observation.hide(env, hidden)
    except ValueError as err:
        raise ConfigError(f"config.env.hidden_observation={hidden}: {err}") from None


def _named(section) -> Environment:
    if section.name != GRIDWORLD:
        try:
            return factory.build(section.name, factory.parse_kwargs(section.kwargs))
        except factory.FactoryError as err:
            raise ConfigError(f"config.env.name={section.name!r}: {err}") from None
    check(
        section.kwargs.strip() in ("", "{}"),
        f"config.env.kwargs={section.kwargs!r}: keyword arguments of a factory env "
        f"(env.name='module:factory' or 'gymnax:<id>'); the gridworld takes env.map, "
        f"env.slippery, env.time_limit and env.rewards; need '{{}}'",
    )
    _check_map_size(section.map)
    try:
        return gridworld.make_env(
            map_name=map_spec(section.map),
            slippery=bool(section.slippery),
            time_limit=int(section.time_limit) or None,
            rewards=tuple(section.rewards),
        )
    except ValueError as err:
        raise ConfigError(f"config.env: {err}") from None


def map_spec(value):
    """A map name ('4x4', 'random:8x8:seed=3') or rows written 'SFFF/FHFH/FFFH/HFFG'."""
    if isinstance(value, str) and "/" in value:
        return tuple(value.split("/"))
    return value


def _check_map_size(value) -> None:
    """ConfigError for a map of more than MAX_MAP_CELLS cells, before it is drawn."""
    if isinstance(value, str) and value.startswith("random:"):
        size = re.match(r"random:(\d+)x(\d+)(:|$)", value)
        cells = int(size.group(1)) * int(size.group(2)) if size else 0
    elif isinstance(value, str) and "/" in value:
        rows = value.split("/")
        cells = len(rows) * max(len(r) for r in rows)
    else:
        cells = 0
    check(
        cells <= MAX_MAP_CELLS,
        f"config.env.map={value[:40]!r}: {cells:,} cells; need at "
        f"most {MAX_MAP_CELLS:,} (e.g. random:500x500:seed=0)",
    )


def check_section(experiment) -> None:
    """ConfigError when the env section cannot work with the experiment's env (the one
    it names, or one a caller supplies: `distrl.local`), or a field of it is out of range."""
    section, env = experiment.config.env, experiment.env
    check(
        isinstance(env, Environment) or host_env.is_host_env(env),
        f"{type(env).__name__} is not an environment: need spec, reset, step and observe "
        f"(distrl.envs.interface)",
    )
    t, timeout, rewards = section.time_limit, section.step_timeout_s, section.rewards
    check(t >= 0, f"config.env.time_limit={t}; need >= 0")
    check(t <= MAX_TIME_LIMIT, f"config.env.time_limit={t}; need 0 .. {MAX_TIME_LIMIT} steps")
    check(timeout >= 0, f"config.env.step_timeout_s={timeout}; need >= 0 seconds (0: no limit)")
    check(
        len(rewards) == 3
        and all(isinstance(r, (int, float)) and math.isfinite(r) for r in rewards),
        f"config.env.rewards={tuple(rewards)}; need 3 finite numbers (goal, hole, step)",
    )
    v = section.vector
    check(v in VECTORS, f"config.env.vector={v!r}; need 'sync' or 'async'")
    check(
        v == "sync" or host_env.is_host_env(env),
        f"config.env.vector={v!r}: only an env stepped in Python (gymnasium) has copies to "
        f"put in subprocesses; {section.name!r} is stepped inside the actors' jit",
    )
