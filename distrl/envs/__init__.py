"""Layer 1, where transitions start: the environment interface (`interface`) and the
built-in gridworld (FrozenLake-v1 dynamics), one implementation of it.

Callers outside this package use the interface (`EnvSpec`, `TimeStep`,
`auto_reset_step`, the capability queries) and never name `GridWorld`. The dm_env
adapter lives in `distrl.envs.dm_env_adapter` and is not imported here, so that
importing the pure environment needs only jax and numpy.
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
    default_time_limit,
    make_env,
)
from distrl.envs.host_env import HostEnv, is_host_env
from distrl.envs.interface import (
    Deterministic,
    Dynamics,
    Environment,
    EnvSpec,
    Grid,
    Success,
    Tabular,
    TimeStep,
    auto_reset_step,
    env_step,
    grid_of,
    is_deterministic,
    success_signal,
    tabular_model,
    timestep,
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
    "Deterministic",
    "Dynamics",
    "EnvSpec",
    "EnvState",
    "Environment",
    "Grid",
    "GridWorld",
    "HostEnv",
    "Success",
    "Tabular",
    "TimeStep",
    "auto_reset_step",
    "bfs_distances",
    "default_time_limit",
    "env_step",
    "grid_of",
    "has_path",
    "is_deterministic",
    "is_host_env",
    "make_env",
    "parse_map",
    "random_map",
    "shortest_path_length",
    "success_signal",
    "tabular_model",
    "timestep",
    "validate_map",
]
