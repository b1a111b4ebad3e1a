"""Environments stepped in Python as the data path sees them: a spec from gymnasium's
spaces and the capabilities the env's tables give, for `gymnasium:<id>` and for a
user's own `gymnasium.Env` (subclass or factory) named `module.path:attribute`.

Such an env is not an `interface.Environment` (no pure reset/step to jit): it is a
frozen, hashable `HostEnv` holding the name and the keyword arguments (JSON), from
which every process makes its copies (`distrl.pyenv`). Actors step them through a
gymnasium vector env (`distrl.acting.host_rollout`), the evaluator plays its episodes the
same way (`distrl.acting.host_evaluation`); `is_host_env` tells the two kinds apart.

Spaces: actions are `Discrete(n)` (the policy's 0..n-1 are shifted by the space's
start) or a `Box` of finite bounds (the policy's [-1, 1] scaled onto them by
`distrl.spaces.Box.to_env`, cast to the Box's dtype: `env_actions_into`); observations
`Box` (kept in their dtype, float64 stored as float32, which the
networks take anyway) or `Discrete(n)`, given to the agent as a one-hot float32
vector of length n. Anything else is a `FactoryError` before any node starts. The
time limit is the env's TimeLimit (its registration's `max_episode_steps`, or
`max_episode_steps` in env.kwargs for a gymnasium id).

Capabilities, asked for as for JAX envs (`interface`): a toy-text env publishing its
transition tables (`env.unwrapped.P`: FrozenLake any map, CliffWalking, Taxi) and its
start distribution (`env.unwrapped.initial_state_distrib`) is a `TabularHostEnv`: the
exact optimum and the greedy policy's exact value (`envs/exact.py`) come from
gymnasium's own tables, and its success signal is "the episode ended on a goal cell",
a terminal cell entered with a positive reward (FrozenLake's G, Taxi's drop-off).
Taxi starts in any of 300 states with equal probability: its exact figures are
expectations over them (`exact.at_start`). FrozenLake is also a grid (`GridHostEnv`:
value and arrow grids; its action order is the gridworld's).
"""

import dataclasses
import functools
import json
from typing import NamedTuple

import numpy as np

from distrl import spaces as distrl_spaces
from distrl.envs.interface import Dynamics, EnvSpec, GridShape


class FactoryError(ValueError):
    """A name or keyword arguments that do not make an env stepped in Python."""


class _Info(NamedTuple):
    spec: EnvSpec
    discrete_obs: int  # n of a Discrete observation space (one-hot), 0 for a Box
    obs_start: int  # a Discrete observation space's start
    action_start: int  # the Discrete action space's start (0 for a Box)
    action_dtype: str  # numpy dtype name of the actions the copies take
    tables: object  # (Dynamics, start distribution float64 [S]) of a tabular env, else None
    desc: tuple  # FrozenLake's map rows, else ()


@dataclasses.dataclass(frozen=True)
class HostEnv:
    """An env stepped in Python: `name` (`gymnasium:<id>` or `module:attribute`) and its
    keyword arguments as canonical JSON text."""

    name: str
    kwargs: str = "{}"

    @property
    def info(self) -> _Info:
        return _describe(self.name, self.kwargs)

    @property
    def spec(self) -> EnvSpec:
        return self.info.spec

    @property
    def action_start(self) -> int:
        return self.info.action_start

    def action_buffer(self, num_envs: int) -> np.ndarray:
        """An empty array [B, *action shape] of actions as the copies take them: int64
        indices (as gymnasium samples them: a copy's checks take an np.int32 slower) or
        the Box's own dtype."""
        spec = self.spec
        return np.empty((num_envs, *spec.action_shape), self.info.action_dtype)

    def env_actions_into(self, actions, out: np.ndarray) -> None:
        """The agent's actions [B, ...] as the copies take them, into `out`
        (`action_buffer`): an index shifted by the Discrete space's start, or the policy's
        [-1, 1] scaled onto the Box's bounds (`interface.env_step` does it for JAX envs)."""
        out[...] = self.spec.actions.to_env(np.asarray(actions))
        if self.action_start:
            out += self.action_start

    def encode(self, obs) -> np.ndarray:
        """A batch of raw observations [B, ...] as the agent takes them [B, *spec shape]."""
        spec = self.spec
        out = np.empty((len(obs), *spec.observation_shape), spec.observation_dtype)
        self.encode_into(obs, out)
        return out

    def encode_into(self, obs, out: np.ndarray) -> None:
        """`encode`, written into `out` [B, *spec shape] (a Box cast to the spec's dtype)."""
        info = self.info
        if info.discrete_obs:
            out[...] = 0
            out[np.arange(len(out)), np.asarray(obs, np.int64) - info.obs_start] = 1
        else:
            out[...] = obs

    def maker(self, index: int):
        """A picklable callable making copy `index`, checked (`pyenv.Checked`)."""
        from distrl import pyenv  # noqa: PLC0415 - gymnasium, for envs stepped in Python only

        return functools.partial(pyenv.make_checked, self.name, self.kwargs, index)


@dataclasses.dataclass(frozen=True)
class TabularHostEnv(HostEnv):
    """A toy-text env with transition tables and a start distribution
    (`interface.Tabular`) and a success signal (ended on a goal cell)."""

    @property
    def num_cells(self) -> int:
        return self.info.discrete_obs

    @property
    def start_cell(self) -> int:
        """The start cell (of several, the first most likely: `start_distribution`)."""
        return int(np.argmax(self.start_distribution))

    @property
    def start_distribution(self) -> np.ndarray:
        """float64 [S]: the probability of starting in each cell (`exact.at_start`)."""
        return self.info.tables[1]

    @property
    def time_limit(self) -> int:
        return self.spec.time_limit

    def dynamics(self) -> Dynamics:
        return self.info.tables[0]

    def cell_observations(self) -> np.ndarray:
        return np.eye(self.num_cells, dtype=np.float32)

    def success(self, timestep):
        """bool [B]: the step ends its episode on a goal cell (numpy, on the host)."""
        cell = np.argmax(np.asarray(timestep.observation), -1)
        return np.asarray(timestep.last) & self.dynamics().goal[cell]


@dataclasses.dataclass(frozen=True)
class GridHostEnv(GridShape, TabularHostEnv):
    """FrozenLake: a tabular env on a grid (`interface.Grid`)."""

    @property
    def desc(self) -> tuple:
        return self.info.desc


def is_host_env(env) -> bool:
    """True for an env stepped in Python (gymnasium), False for a JAX env."""
    return isinstance(env, HostEnv)


def canonical_kwargs(kwargs: dict) -> str:
    return json.dumps(kwargs, sort_keys=True)


def make(name: str, kwargs: dict) -> HostEnv:
    """The env stepped in Python that `name` names (FactoryError when it cannot be one)."""
    text = canonical_kwargs(kwargs)
    info = _describe(name, text)
    if info.desc:
        return GridHostEnv(name, text)
    if info.tables is not None:
        return TabularHostEnv(name, text)
    return HostEnv(name, text)


def is_gymnasium_env(obj) -> bool:
    """True for a gymnasium.Env (what a user's factory may return instead of a JAX env)."""
    import gymnasium  # noqa: PLC0415 - imported once a name may be a gymnasium env

    return isinstance(obj, gymnasium.Env)


@functools.cache
def _describe(name: str, kwargs_json: str) -> _Info:
    """The spec and tables of env `name`, from one copy made once per process."""
    import gymnasium  # noqa: PLC0415 - imported for envs stepped in Python only

    from distrl import pyenv  # noqa: PLC0415

    try:
        env = pyenv.make_raw(name, kwargs_json)
    except gymnasium.error.Error as err:
        raise FactoryError(f"gymnasium: {err}") from None
    except Exception as err:  # noqa: BLE001 - any failure of user code is reported by name
        raise FactoryError(f"making it raised {type(err).__name__}: {err}") from None
    if not isinstance(env, gymnasium.Env):
        raise FactoryError(f"returned a {type(env).__name__}, not a gymnasium.Env")
    try:
        return _info_of(env)
    finally:
        env.close()


def _info_of(env) -> _Info:
    import gymnasium  # noqa: PLC0415

    from distrl import pyenv  # noqa: PLC0415

    spaces = gymnasium.spaces
    actions, obs = env.action_space, env.observation_space
    action_space = _action_space(actions)
    limit = pyenv.time_limit(env)
    if not limit:
        raise FactoryError(
            "no time limit: register it with max_episode_steps, wrap it in "
            "gymnasium.wrappers.TimeLimit, or give env.kwargs max_episode_steps (a gymnasium id)"
        )
    if isinstance(obs, spaces.Discrete):
        shape, dtype, n, start = (int(obs.n),), "float32", int(obs.n), int(obs.start)
    elif isinstance(obs, spaces.Box) and obs.shape and all(d >= 1 for d in obs.shape):
        dtype = "float32" if obs.dtype == np.float64 else np.dtype(obs.dtype).name
        shape, n, start = tuple(int(d) for d in obs.shape), 0, 0
    else:
        raise FactoryError(
            f"observation space {obs}: need a Box (any shape) or a Discrete (one-hot)"
        )
    discrete = isinstance(action_space, distrl_spaces.Discrete)
    num_actions = action_space.n if discrete else 0
    spec = EnvSpec(shape, dtype, num_actions, int(limit), None if discrete else action_space)
    tables = _tables(env.unwrapped, n, num_actions) if n and not start and discrete else None
    desc = ()
    if tables is not None and type(env.unwrapped).__name__ == "FrozenLakeEnv":
        desc = tuple(row.tobytes().decode() for row in env.unwrapped.desc)
    action_start = int(actions.start) if discrete else 0
    action_dtype = "int64" if discrete else np.dtype(actions.dtype).name
    return _Info(spec, n, start, action_start, action_dtype, tables, desc)


def _action_space(actions) -> distrl_spaces.Discrete | distrl_spaces.Box:
    """gymnasium's action space as distrl's (FactoryError for one it cannot take)."""
    import gymnasium  # noqa: PLC0415

    if isinstance(actions, gymnasium.spaces.Discrete):
        return distrl_spaces.Discrete(int(actions.n))
    if isinstance(actions, gymnasium.spaces.Box):
        try:
            return distrl_spaces.box(actions.shape, actions.low, actions.high)
        except ValueError as err:
            raise FactoryError(f"action space {actions}: {err}") from None
    raise FactoryError(f"action space {actions}: need a Discrete or a Box")


def _tables(unwrapped, num_states: int, num_actions: int):
    """(Dynamics, start distribution [S]) from a toy-text env's `P` and
    `initial_state_distrib`, else None.

    P[s][a] lists (probability, next state, reward, terminated); a state is terminal
    when entering it ends the episode (every transition into it that an episode can
    make says so, or the tables are not of this form: Taxi also lists states no
    episode reaches, e.g. its passenger waiting at the destination), a goal when it is
    terminal and entered with a positive reward.
    """
    table = getattr(unwrapped, "P", None)
    start = np.asarray(getattr(unwrapped, "initial_state_distrib", []), np.float64)
    if not isinstance(table, dict) or start.shape != (num_states,):
        return None
    if np.any(start < 0) or abs(start.sum() - 1.0) > 1e-9:
        return None
    width = max(len(table[s][a]) for s in range(num_states) for a in range(num_actions))
    shape = (num_states, num_actions, width)
    next_cell, prob, reward = np.zeros(shape, np.int64), np.zeros(shape), np.zeros(shape)
    ends, entered = np.zeros(num_states, bool), np.zeros(num_states, bool)
    paid = np.zeros(num_states, bool)
    for s in range(num_states):
        for a in range(num_actions):
            for k, (p, s2, r, done) in enumerate(table[s][a]):
                next_cell[s, a, k], prob[s, a, k], reward[s, a, k] = s2, p, r
                if p > 0:
                    entered[s2], ends[s2] = True, ends[s2] or bool(done)
                    paid[s2] |= bool(done) and r > 0
    if np.any(start[ends] > 0):
        return None
    reached, frontier = start > 0, list(np.flatnonzero(start > 0))
    while frontier:  # terminal must depend on the state entered only, where episodes go
        s = frontier.pop()
        for a in range(num_actions):
            for p, s2, _, done in table[s][a]:
                if p > 0 and bool(done) != ends[s2]:
                    return None
                if p > 0 and not ends[s2] and not reached[s2]:
                    reached[s2] = True
                    frontier.append(s2)
    dynamics = Dynamics(next_cell, prob, reward, ends, ends & paid)
    return dynamics, start / start.sum()
