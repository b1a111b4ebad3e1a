"""A `dm_env.Environment` over one GridWorld: the stateful shell around layer 1.

For tools, tests and code written against dm_env (Acme-style loops, evaluators that
step one episode at a time). It is slow by design (a host round trip per step);
training rollouts use the pure functions in `gridworld.py` under vmap and scan.
"""

from __future__ import annotations

import dm_env
import jax
import numpy as np
from dm_env import specs

from distrl.envs.gridworld import NUM_ACTIONS, GridWorld


class DmEnvAdapter(dm_env.Environment):
    """dm_env view of a GridWorld, holding the state and key between calls.

    Follows dm_env conventions: a fresh environment, or one whose last timestep was
    LAST, starts a new episode on the next `step` (ignoring the action). Episodes
    ending on H or G are terminations (discount 0); hitting the time limit
    elsewhere is a truncation (discount 1).
    """

    def __init__(self, env: GridWorld, seed: int = 0):
        self._env = env
        self._key = jax.random.PRNGKey(seed)
        self._reset = jax.jit(env.reset)
        self._step = jax.jit(env.step)
        self._state = None
        self._needs_reset = True

    @property
    def env(self) -> GridWorld:
        return self._env

    def reset(self) -> dm_env.TimeStep:
        """Starts an episode; observation float32 [num_cells]."""
        self._key, key = jax.random.split(self._key)
        self._state, timestep = self._reset(key)
        self._needs_reset = False
        return dm_env.restart(np.asarray(timestep.observation))

    def step(self, action) -> dm_env.TimeStep:
        """Steps with an int action in 0..3; raises ValueError otherwise."""
        if self._needs_reset:
            return self.reset()
        action = _checked_action(action)
        self._key, key = jax.random.split(self._key)
        self._state, timestep = self._step(self._state, action, key)
        observation = np.asarray(timestep.observation)
        reward = np.float32(timestep.reward)
        if not bool(timestep.last):
            return dm_env.transition(reward, observation, np.float32(1.0))
        self._needs_reset = True
        if float(timestep.discount) == 0.0:
            return dm_env.termination(reward, observation)._replace(discount=np.float32(0.0))
        return dm_env.truncation(reward, observation, np.float32(timestep.discount))

    def observation_spec(self) -> specs.BoundedArray:
        return specs.BoundedArray(
            (self._env.obs_size,), np.float32, minimum=0.0, maximum=1.0, name="observation"
        )

    def action_spec(self) -> specs.DiscreteArray:
        return specs.DiscreteArray(NUM_ACTIONS, dtype=np.int32, name="action")

    def reward_spec(self) -> specs.Array:
        return specs.Array((), np.float32, name="reward")

    def discount_spec(self) -> specs.BoundedArray:
        return specs.BoundedArray((), np.float32, minimum=0.0, maximum=1.0, name="discount")


def _checked_action(action) -> np.int32:
    """Returns the action as int32 [] after checking it is an integer in 0..3."""
    value = np.asarray(action)
    if value.shape != () or not np.issubdtype(value.dtype, np.integer):
        raise ValueError(f"action must be a scalar integer in 0..3, got {action!r}")
    if not 0 <= int(value) < NUM_ACTIONS:
        raise ValueError(f"action must be in 0..3 (LEFT, DOWN, RIGHT, UP), got {action!r}")
    return np.int32(value)
