"""The gridworld as pure JAX functions: layer 1 of the data flow.

`GridWorld.reset` and `GridWorld.step` are pure functions of an explicit `EnvState`
and PRNG key, written for one environment; callers batch them with `jax.vmap` and
unroll them with `lax.scan` (see `distrl/acting/rollout.py`). The dynamics are those of
Gymnasium's FrozenLake-v1; the TimeStep a step returns is what actors record. It
implements `envs.interface` with every optional capability (a success signal, a
declared determinism, a tabular model, a grid); only `distrl/envs/` names it.

`GridWorld` holds only hashable Python data, so it can be a static jit argument or a
closure constant; its lookup tables are built on the host once per map and enter
the computation as XLA constants, which makes `step` a couple of gathers.

Out-of-range actions: outside jit, `step` raises ValueError for concrete actions
outside 0..3; inside jit they cannot be checked and are clipped to 0..3.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from distrl.envs import maps
from distrl.envs.interface import Dynamics, EnvSpec, GridShape, TimeStep, timestep

LEFT, DOWN, RIGHT, UP = 0, 1, 2, 3
ACTION_NAMES = ("LEFT", "DOWN", "RIGHT", "UP")
NUM_ACTIONS = 4
# (row, col) offsets indexed by action, Gymnasium order.
_MOVES = ((0, -1), (1, 0), (0, 1), (-1, 0))


class EnvState(NamedTuple):
    """Everything the dynamics need; a pytree of scalars (leading [B] when vmapped)."""

    position: jax.Array  # int32 []: cell index row * cols + col.
    t: jax.Array  # int32 []: steps taken so far this episode.


class _Tables(NamedTuple):
    """Host-side lookup tables, flattened so that one gather indexes them."""

    next_cell: np.ndarray  # int32 [num_cells * 4]: cell reached by moving in a direction.
    reward: np.ndarray  # float32 [num_cells * 4]: reward for that move.
    terminal: np.ndarray  # bool [num_cells]: H or G.


@functools.lru_cache(maxsize=64)
def _build_tables(desc: maps.Map, rewards: tuple[float, float, float]) -> _Tables:
    """Precomputes the deterministic moves of every (cell, direction) pair."""
    rows, cols = len(desc), len(desc[0])
    goal, hole, step = rewards
    reward_of = {"G": goal, "H": hole, "S": step, "F": step}
    next_cell = np.zeros((rows * cols, NUM_ACTIONS), np.int32)
    reward = np.zeros((rows * cols, NUM_ACTIONS), np.float32)
    for r in range(rows):
        for c in range(cols):
            for a, (dr, dc) in enumerate(_MOVES):
                if desc[r][c] in "HG":
                    # Absorbing, as in Gymnasium's transition table: stepping past the
                    # end (without a reset) stays put with reward 0 and stays terminal.
                    next_cell[r * cols + c, a] = r * cols + c
                    continue
                # Walls clip the move, so the agent stays in place.
                nr, nc = min(max(r + dr, 0), rows - 1), min(max(c + dc, 0), cols - 1)
                next_cell[r * cols + c, a] = nr * cols + nc
                reward[r * cols + c, a] = reward_of[desc[nr][nc]]
    terminal = np.array([ch in "HG" for ch in "".join(desc)])
    tables = _Tables(next_cell.reshape(-1), reward.reshape(-1), terminal)
    for array in tables:
        array.flags.writeable = False  # Shared through the cache.
    return tables


def default_time_limit(desc: Sequence[str]) -> int:
    """Gymnasium's limits: 100 steps for a 4x4 map, 200 for any other map."""
    return 100 if (len(desc), len(desc[0])) == (4, 4) else 200


def _check_concrete_action(action) -> None:
    """Raises for a concrete action outside 0..3; traced actions are clipped later."""
    if isinstance(action, jax.core.Tracer):
        return
    values = np.asarray(action)
    if not np.issubdtype(values.dtype, np.integer):
        raise ValueError(f"action must be an integer in 0..3, got {action!r}")
    if values.size and (values.min() < 0 or values.max() >= NUM_ACTIONS):
        raise ValueError(f"action must be in 0..3 (LEFT, DOWN, RIGHT, UP), got {action!r}")


@dataclasses.dataclass(frozen=True)
class GridWorld(GridShape):
    """FrozenLake-v1 dynamics on a fixed map; frozen and hashable.

    Attributes:
      desc: map rows over S/F/H/G.
      slippery: if True the agent moves in the intended direction or either
        perpendicular one, each with probability 1/3.
      time_limit: steps after which an episode is truncated (None -> 100 on 4x4
        maps, 200 otherwise).
      rewards: (goal, hole, step) rewards for the cell a step lands on.
    """

    desc: maps.Map = maps.MAPS["4x4"]
    slippery: bool = False
    time_limit: int | None = None
    rewards: tuple[float, float, float] = (1.0, -1.0, 0.0)

    def __post_init__(self):
        # Coerce to canonical hashable values (lists -> tuples, numpy -> Python).
        desc = maps.validate_map(self.desc)
        object.__setattr__(self, "desc", desc)
        object.__setattr__(self, "slippery", bool(self.slippery))
        limit = default_time_limit(desc) if self.time_limit is None else self.time_limit
        if isinstance(limit, bool) or not isinstance(limit, (int, np.integer)) or limit <= 0:
            raise ValueError(f"time_limit must be a positive int, got {self.time_limit!r}")
        object.__setattr__(self, "time_limit", int(limit))
        rewards = tuple(self.rewards)
        if len(rewards) != 3:
            raise ValueError(
                f"rewards must be (goal, hole, step), got {len(rewards)} values: {rewards!r}"
            )
        object.__setattr__(self, "rewards", tuple(float(r) for r in rewards))

    # -- sizes (rows, cols: GridShape) ---------------------------------------
    @property
    def num_cells(self) -> int:
        return self.rows * self.cols

    @property
    def obs_size(self) -> int:
        return self.num_cells

    @property
    def num_actions(self) -> int:
        return NUM_ACTIONS

    @property
    def start_cell(self) -> int:
        """Cell index of S."""
        return "".join(self.desc).index("S")

    # -- the interface (`envs.interface`): spec and capabilities ------------------
    @property
    def spec(self) -> EnvSpec:
        """A float32 one-hot observation of the cell, 4 actions, the time limit."""
        return EnvSpec((self.num_cells,), "float32", NUM_ACTIONS, self.time_limit)

    @property
    def deterministic(self) -> bool:
        """Episodes start at S; without slip every step is determined by the action."""
        return not self.slippery

    def success(self, timestep: TimeStep) -> jax.Array:
        """bool []: the step ends its episode on G."""
        goal = jnp.asarray(self.goal_mask().reshape(-1), jnp.float32)
        return timestep.last & (timestep.observation @ goal > 0)

    def dynamics(self) -> Dynamics:
        """The transition tables as outcome arrays, K = 3 equally likely slips or 1."""
        tables = _build_tables(self.desc, self.rewards)
        moves = tables.next_cell.reshape(self.num_cells, NUM_ACTIONS)
        rewards = tables.reward.reshape(self.num_cells, NUM_ACTIONS)
        actions = np.arange(NUM_ACTIONS)
        offsets = (-1, 0, 1) if self.slippery else (0,)
        directions = np.stack([(actions + o) % NUM_ACTIONS for o in offsets], -1)  # [A, K]
        next_cell = moves[:, directions].astype(np.int64)  # [S, A, K]
        reward = rewards[:, directions].astype(np.float64)
        prob = np.full(next_cell.shape, 1.0 / len(offsets))
        goal = self.goal_mask().ravel()
        return Dynamics(next_cell, prob, reward, np.asarray(tables.terminal), goal)

    def cell_observations(self) -> np.ndarray:
        """float32 [num_cells, num_cells]: the one-hot observation of every cell."""
        return np.eye(self.num_cells, dtype=np.float32)

    # -- helpers for tables, value grids and renderers (numpy, host side) --------
    def cell_kinds(self) -> np.ndarray:
        """Map letters as a '<U1' array [rows, cols]."""
        return np.array([list(row) for row in self.desc])

    def hole_mask(self) -> np.ndarray:
        """bool [rows, cols]: True on H."""
        return self.cell_kinds() == "H"

    def goal_mask(self) -> np.ndarray:
        """bool [rows, cols]: True on G."""
        return self.cell_kinds() == "G"

    def cell_coords(self, cell: int) -> tuple[int, int]:
        """(row, col) of a cell index."""
        return divmod(int(cell), self.cols)

    # -- pure JAX dynamics -------------------------------------------------------
    def observe(self, state: EnvState) -> jax.Array:
        """One-hot float32 [num_cells] of `state.position`."""
        return jax.nn.one_hot(state.position, self.num_cells, dtype=jnp.float32)

    def reset(self, key: jax.Array) -> tuple[EnvState, TimeStep]:
        """Starts an episode at S.

        FrozenLake always starts at S, so `key` is unused; it is kept so that callers
        treat every environment alike.

        Returns:
          (EnvState with scalar int32 position and t = 0,
           TimeStep with observation [num_cells], reward 0, discount 1, last False).
        """
        del key
        state = EnvState(jnp.int32(self.start_cell), jnp.int32(0))
        return state, timestep(self.observe(state), 0.0, False, False)

    def step(self, state: EnvState, action, key: jax.Array) -> tuple[EnvState, TimeStep]:
        """Moves one environment by one step.

        Args:
          state: EnvState of scalars.
          action: int32 [] in 0..3 (LEFT, DOWN, RIGHT, UP). Concrete values outside
            the range raise ValueError; traced ones are clipped to 0..3.
          key: PRNG key, used only when slippery.

        Returns:
          (next EnvState, TimeStep of the transition). `last` is True on H, G or at
          the time limit; `discount` is 0 only on H or G (also at the time limit).
        """
        _check_concrete_action(action)
        tables = _build_tables(self.desc, self.rewards)
        direction = jnp.clip(jnp.asarray(action, jnp.int32), 0, NUM_ACTIONS - 1)
        if self.slippery:  # Static: resolved at trace time, not a traced branch.
            # Gymnasium draws uniformly from (a - 1) % 4, a, (a + 1) % 4. One word of
            # random bits mod 3 costs one threefry call (randint needs two); its bias,
            # (2**32 mod 3) / 2**32 ~ 2e-10, is far below anything a rollout can see.
            offset = (jax.random.bits(key, (), jnp.uint32) % 3).astype(jnp.int32)
            direction = (direction + offset + NUM_ACTIONS - 1) % NUM_ACTIONS
        index = state.position * NUM_ACTIONS + direction
        position = jnp.asarray(tables.next_cell)[index]
        reward = jnp.asarray(tables.reward)[index]
        terminated = jnp.asarray(tables.terminal)[position]
        t = state.t + 1
        next_state = EnvState(position, t)
        # Terminated on H or G (discount 0); truncated at the time limit (bootstrapped).
        truncated = t >= self.time_limit
        return next_state, timestep(self.observe(next_state), reward, terminated, truncated)


def make_env(
    map_name: str | Sequence[str] = "4x4",
    slippery: bool = False,
    time_limit: int | None = None,
    rewards: Sequence[float] = (1.0, -1.0, 0.0),
) -> GridWorld:
    """Builds a GridWorld.

    Args:
      map_name: "4x4", "8x8", "random:<rows>x<cols>:seed=<int>[:p=<p_frozen>]", or a
        sequence of row strings over S/F/H/G.
      slippery: FrozenLake's is_slippery.
      time_limit: truncation step count; None -> 100 on 4x4 maps, 200 otherwise.
      rewards: (goal, hole, step).

    Returns:
      GridWorld with obs_size = rows * cols and num_actions = 4.
    """
    return GridWorld(maps.parse_map(map_name), slippery, time_limit, tuple(rewards))
