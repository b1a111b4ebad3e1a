"""The environment interface every caller uses: a spec, pure functions, and optional
capabilities asked for by name.

An environment is a frozen, hashable object (a static `jit` argument) with
  spec: EnvSpec (observation shape and dtype, its actions, time limit);
  reset(key) -> (state, TimeStep) and step(state, action, key) -> (state, TimeStep)
    for ONE env, pure, jittable and vmappable (callers vmap them);
  observe(state) -> observation, the policy's input in `state`.
`step` ends every episode by `spec.time_limit` steps, so an evaluation loop ends.
Callers step an env through `env_step`, which maps the policy's action onto the env's
action space (`distrl.spaces`: a Box's policy acts in [-1, 1]).

What only some environments have is a capability, asked for through the functions
below and never assumed: `success_signal` (did an episode end in success),
`is_deterministic` (one evaluation episode is exact), `tabular_model` (transition and
reward tables: the exact figures of `envs/exact.py`, and a value per state) and
`grid_of` (a grid to draw values and greedy actions on). Code that needs one takes
its path only when the answer is not None (or True); the gridworld has them all.
"""

from __future__ import annotations

from typing import NamedTuple, Protocol, runtime_checkable

import jax
import jax.numpy as jnp
import numpy as np

from distrl import spaces


class EnvSpec(NamedTuple):
    """What the data path needs to know about an env: it sizes items, networks and memory."""

    observation_shape: tuple  # of one env's observation, e.g. (16,) or (10, 10, 4)
    observation_dtype: str  # numpy dtype name, e.g. "float32", "uint8", "bool"
    num_actions: int  # discrete actions 0..num_actions-1; 0 with a Box action_space
    time_limit: int  # steps after which an episode is truncated
    action_space: spaces.Box | spaces.Discrete | None = None  # None: Discrete(num_actions)

    @property
    def obs_size(self) -> int:
        """Elements of one observation: the input width of a network that flattens it."""
        return int(np.prod(self.observation_shape, dtype=np.int64))

    @property
    def actions(self) -> spaces.Box | spaces.Discrete:
        """The action space: `action_space`, or Discrete(num_actions) without one."""
        return spaces.Discrete(self.num_actions) if self.action_space is None else self.action_space

    @property
    def action_shape(self) -> tuple:
        """Of one action as the policy gives it: () for Discrete, the Box's shape."""
        return tuple(self.actions.shape)

    @property
    def action_dtype(self) -> str:
        """numpy dtype name of one action: "int32" (Discrete) or "float32" (Box)."""
        return self.actions.dtype


class TimeStep(NamedTuple):
    """What one step tells the agent (leading [B] when vmapped).

    Termination and truncation are kept apart by two fields, the encoding
    `types.Transition` records and the learners read: `discount` is 0 only on
    termination (no bootstrap), 1 otherwise, a truncation included (bootstrap from
    the observation reached); `last` is True on either. Build it with `timestep`.
    """

    observation: jax.Array  # [*observation_shape] of spec.observation_dtype
    reward: jax.Array  # float32 []
    discount: jax.Array  # float32 []: 0 only on termination, else 1
    last: jax.Array  # bool []: terminated or truncated

    @property
    def terminated(self) -> jax.Array:
        """bool []: the episode ended in an absorbing state (no value beyond it)."""
        return self.last & (self.discount == 0)

    @property
    def truncated(self) -> jax.Array:
        """bool []: the episode was cut off (the time limit) in a state with a value."""
        return self.last & (self.discount != 0)


def timestep(observation, reward, terminated, truncated) -> TimeStep:
    """The one encoding of a step's end: discount 0 on termination, last on either."""
    terminated = jnp.asarray(terminated, jnp.bool_)
    return TimeStep(
        observation=observation,
        reward=jnp.asarray(reward, jnp.float32),
        discount=jnp.where(terminated, 0.0, 1.0).astype(jnp.float32),
        last=terminated | jnp.asarray(truncated, jnp.bool_),
    )


@runtime_checkable
class Environment(Protocol):
    """What every env provides (see the module docstring)."""

    @property
    def spec(self) -> EnvSpec: ...

    def reset(self, key: jax.Array) -> tuple: ...

    def step(self, state, action, key: jax.Array) -> tuple: ...

    def observe(self, state) -> jax.Array: ...


def env_step(env: Environment, state, action, key: jax.Array) -> tuple:
    """`env.step` on the policy's action mapped onto the env's space (`spaces.Box.to_env`;
    a Discrete action as is): the only way callers step an env of this interface."""
    return env.step(state, env.spec.actions.to_env(action), key)


def auto_reset_step(env: Environment, state, action, key: jax.Array) -> tuple:
    """Steps one environment and resets it in place when the episode ends.

    Jittable and vmappable; the choice is a select over the state pytree, not a
    Python branch.

    Returns:
      (state, timestep): timestep is the true transition (observation = the one
      reached, before any reset, for bootstrapping a truncation); state is the reset
      state when timestep.last, else the stepped state. The policy's next input is
      env.observe(state).
    """
    # Separate keys keep step and reset independent; XLA drops whatever is unused.
    step_key, reset_key = jax.random.split(key)
    next_state, ts = env_step(env, state, action, step_key)
    reset_state, _ = env.reset(reset_key)
    state = jax.tree.map(
        lambda reset, stepped: jnp.where(ts.last, reset, stepped), reset_state, next_state
    )
    return state, ts


# -- optional capabilities -------------------------------------------------------------


@runtime_checkable
class Success(Protocol):
    """An env whose episodes succeed or fail (the gridworld: ending on G)."""

    def success(self, timestep: TimeStep) -> jax.Array:
        """bool []: this step ends its episode in success (jittable, vmappable)."""


@runtime_checkable
class Deterministic(Protocol):
    """An env that may declare its episodes alike (fixed start, no noise in `step`)."""

    deterministic: bool


class Dynamics(NamedTuple):
    """One step from every (state, action): K outcomes with their probabilities."""

    next_cell: np.ndarray  # int64 [S, A, K]
    prob: np.ndarray  # float64 [S, A, K]
    reward: np.ndarray  # float64 [S, A, K]: reward for the state landed on
    terminal: np.ndarray  # bool [S]: the episode ends on landing there
    goal: np.ndarray  # bool [S]: landing there is a success


@runtime_checkable
class Tabular(Protocol):
    """A finite-state env with its tables; its states are called cells, 0..num_cells-1."""

    num_cells: int
    start_cell: int  # every episode starts here; a model whose episodes start anywhere
    # may also have start_distribution (float64 [S]), which exact figures then average
    # over (`exact.at_start`; gymnasium's Taxi), start_cell being its most likely cell
    time_limit: int

    def dynamics(self) -> Dynamics:
        """The transition and reward tables (numpy, host side)."""

    def cell_observations(self) -> np.ndarray:
        """[num_cells, *observation_shape]: the observation of every cell."""


@runtime_checkable
class Grid(Protocol):
    """A tabular env laid out on rows x cols cells (row-major cell indices)."""

    rows: int
    cols: int
    desc: tuple  # rows of letters, one per cell; cells other than S and F are drawn as letters


class GridShape:
    """`rows` and `cols` of a grid env from its `desc` (one string per row): a mixin."""

    @property
    def rows(self) -> int:
        return len(self.desc)

    @property
    def cols(self) -> int:
        return len(self.desc[0])


def success_signal(env):
    """`success(timestep) -> bool []` of an env that has one, else None."""
    return env.success if isinstance(env, Success) else None


def is_deterministic(env) -> bool:
    """True only for an env that declares its episodes alike."""
    return isinstance(env, Deterministic) and bool(env.deterministic)


def tabular_model(env) -> Tabular | None:
    """The env as a `Tabular` model when it is one, else None."""
    return env if isinstance(env, Tabular) else None


def grid_of(env) -> Grid | None:
    """The env as a `Grid` (tabular too) when it is one, else None."""
    return env if isinstance(env, Grid) and isinstance(env, Tabular) else None
