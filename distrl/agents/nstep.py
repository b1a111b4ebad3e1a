"""Between rollout and replay (DQN): turning trajectories into n-step transitions.

Pure functions used by the DQN writer (actor side) and the local trainer. The
window starting at step t sums rewards over at most n steps and stops at the first
episode end (`last`) inside it:
  reward   = sum_{k<m} gamma**k r_{t+k}           (m = steps kept, 1 <= m <= n)
  discount = gamma**m * discount_{t+m-1}           (0 after a termination)
  next_observation = next_observation_{t+m-1}      (pre-reset obs on truncation)
so a truncated window bootstraps from the final observation and a terminated one
does not bootstrap at all. The loss uses `discount` as is, with no extra gamma.
"""

import jax
import jax.numpy as jnp

from distrl.types import QTransition, Transition


def n_step_transitions(traj: Transition, n: int, gamma: float) -> QTransition:
    """Transition [T, ...] -> QTransition [T - n + 1, ...] (one window per start).

    Windows start at t = 0 .. T-n, each needing steps t .. t+n-1 of the chunk. To
    emit every step exactly once across consecutive chunks, callers keep the last
    n - 1 steps of each chunk and prepend them to the next one (see
    `concat_tail` / `tail`). Trailing dims after T (e.g. B envs) are free.
    """
    num_steps = traj.reward.shape[0]
    if not 1 <= n <= num_steps:
        raise ValueError(f"need 1 <= n ({n}) <= T ({num_steps})")
    out_len = num_steps - n + 1
    window = lambda x, k: jax.lax.slice_in_dim(x, k, k + out_len, axis=0)

    r_0 = window(traj.reward, 0)  # [T', ...]
    alive = jnp.ones_like(r_0)  # step t+k is still in the window's episode
    reward = jnp.zeros_like(r_0)
    discount = jnp.ones_like(r_0)
    next_obs = window(traj.next_observation, 0)
    for k in range(n):  # n is small and static
        r_k = window(traj.reward, k)
        last_k = window(traj.last, k).astype(reward.dtype)
        reward = reward + alive * gamma**k * r_k
        discount = jnp.where(alive > 0, discount * gamma * window(traj.discount, k), discount)
        # this step's next obs is the latest kept; obs dims beyond [T', B] of any rank
        take = (alive > 0).reshape(alive.shape + (1,) * (next_obs.ndim - alive.ndim))
        next_obs = jnp.where(take, window(traj.next_observation, k), next_obs)
        alive = alive * (1.0 - last_k)
    return QTransition(
        observation=window(traj.observation, 0),
        action=window(traj.action, 0),
        reward=reward,
        discount=discount,
        next_observation=next_obs,
    )


def tail(traj: Transition, n: int) -> Transition:
    """The last n - 1 steps of a chunk [T, ...], to prepend to the next chunk."""
    return jax.tree.map(lambda x: x[x.shape[0] - (n - 1) :], traj)


def concat_tail(prev_tail: Transition, traj: Transition) -> Transition:
    """Prepends a carried tail [n-1, ...] to a chunk [T, ...] -> [T + n - 1, ...]."""
    return jax.tree.map(lambda a, b: jnp.concatenate([a, b], axis=0), prev_tail, traj)
