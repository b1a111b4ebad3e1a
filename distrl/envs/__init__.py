"""Pure-JAX gridworld (FrozenLake-v1 dynamics): layer 1, where transitions start.

The dm_env adapter lives in `distrl.envs.dm_env_adapter` and is not imported here,
so that importing the pure environment needs only jax and numpy.
"""

from distrl.envs.gridworld import (
    ACTION_NAMES,
    DOWN,
    LEFT,
    NUM_ACTIONS,
    RIGHT,
    UP,
    EnvState,
    GridWorld,
    TimeStep,
    auto_reset_step,
    default_time_limit,
    make_env,
)
from distrl.envs.maps import (
    MAPS,
    bfs_distances,
    has_path,
    parse_map,
    random_map,
    shortest_path_length,
    validate_map,
)

__all__ = [
    "ACTION_NAMES",
    "DOWN",
    "LEFT",
    "MAPS",
    "NUM_ACTIONS",
    "RIGHT",
    "UP",
    "EnvState",
    "GridWorld",
    "TimeStep",
    "auto_reset_step",
    "bfs_distances",
    "default_time_limit",
    "has_path",
    "make_env",
    "parse_map",
    "random_map",
    "shortest_path_length",
    "validate_map",
]
