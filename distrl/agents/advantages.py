"""Stage 3, policy-gradient side: advantages of fixed-length trajectory chunks.

Chunks `Transition` [T] cross episode ends. The trick that lets rlax handle them
exactly: with values v = V(obs_0 .. obs_{T-1}, next_obs_{T-1}) [T+1],
  discount_t = gamma * (1 - last_t)
  r'_t = r_t + gamma * env_discount_t * last_t * V(next_observation_t)
a truncated step bootstraps from its final (pre-reset) observation, a terminated
step from nothing, and the backward recursion never crosses an episode end.
"""

import jax
import jax.numpy as jnp

from distrl.agents.rlax_import import rlax
from distrl.types import Transition


def bootstrap_rewards(traj: Transition, v_next: jnp.ndarray, gamma: float):
    """(r'_t [T], discount_t [T]) for one chunk; v_next [T] = V(next_observation_t)."""
    last = traj.last.astype(jnp.float32)  # [T]
    r_t = traj.reward + gamma * traj.discount * last * v_next
    discount_t = gamma * (1.0 - last)
    return r_t, discount_t


def gae(traj: Transition, v_obs, v_next, gamma: float, lambda_: float):
    """GAE(lambda) for one chunk: v_obs, v_next [T] -> (advantages [T], returns [T]).

    lambda_=1 gives Monte-Carlo returns minus the baseline (bootstrapped at the
    chunk end from V(next_obs_{T-1}), so with a zero critic: plain MC in the chunk).
    """
    v_obs, v_next = jax.lax.stop_gradient((v_obs, v_next))
    r_t, discount_t = bootstrap_rewards(traj, v_next, gamma)
    values = jnp.concatenate([v_obs, v_next[-1:]])  # [T+1]
    adv = rlax.truncated_generalized_advantage_estimation(r_t, discount_t, lambda_, values)
    return adv, adv + v_obs


def vtrace(
    traj: Transition,
    v_obs,
    v_next,
    log_rho,
    gamma: float,
    lambda_: float,
    clip_rho_threshold: float,
    clip_pg_rho_threshold: float,
):
    """V-trace for one chunk: log_rho [T] = log pi(a|s) - log mu(a|s).

    Returns (pg_advantages [T], value_targets [T]), both without gradients.
    """
    v_obs, v_next, log_rho = jax.lax.stop_gradient((v_obs, v_next, log_rho))
    r_t, discount_t = bootstrap_rewards(traj, v_next, gamma)
    v_t = jnp.concatenate([v_obs[1:], v_next[-1:]])  # [T], V(s_{t+1}) in the chunk
    out = rlax.vtrace_td_error_and_advantage(
        v_obs,
        v_t,
        r_t,
        discount_t,
        jnp.exp(log_rho),
        lambda_,
        clip_rho_threshold,
        clip_pg_rho_threshold,
    )
    return out.pg_advantage, out.errors + v_obs


def segment_returns(traj: Transition, gamma: float) -> tuple[jnp.ndarray, ...]:
    """Per-step return of the episode segment it belongs to, for one chunk [T].

    A segment is the part of one episode inside the chunk. Returns
    (segment_return [T], complete [T] bool, is_start [T] bool): the discounted
    return from the segment's first in-chunk step to its end (no bootstrap), whether
    the segment ends (`last`) inside the chunk, and whether step t starts a segment.
    """
    last = traj.last.astype(jnp.float32)

    def backward(carry, xs):  # return-to-go and "ends in chunk", reset at `last`
        g, ends = carry
        r, l = xs
        g = r + gamma * (1.0 - l) * g
        ends = jnp.maximum(l, (1.0 - l) * ends)
        return (g, ends), (g, ends)

    init = (jnp.zeros(()), jnp.zeros(()))
    _, (g, ends) = jax.lax.scan(backward, init, (traj.reward, last), reverse=True)
    is_start = jnp.concatenate([jnp.ones((1,)), last[:-1]]) > 0  # [T]

    def forward(seg_return, xs):  # broadcast each segment's start value along it
        g_t, start = xs
        seg_return = jnp.where(start, g_t, seg_return)
        return seg_return, seg_return

    _, seg = jax.lax.scan(forward, jnp.zeros(()), (g, is_start))
    return seg, ends > 0, is_start


def grpo(batch: Transition, gamma: float, eps: float = 1e-6):
    """Group-relative advantages for a batch of chunks [T, N]; no critic.

    The group is every episode segment of the batch that ends inside its chunk
    (one per `last` step); for whole-episode windows (`extras["owned"]`, see
    `distrl.agents.episodes`), every whole episode the window trains. Each such
    segment scores its discounted return R (see `segment_returns`); all its steps
    get (R - mean(R)) / (std(R) + eps), with mean and std over the group. Steps of
    segments still running at the chunk end get weight 0 (their outcome is unknown).
    Returns (advantages [T, N], weights [T, N], group_size []).
    """
    seg, complete, is_start = jax.vmap(segment_returns, in_axes=(1, None), out_axes=1)(
        batch, gamma
    )  # [T, N] each
    owned = batch.extras.get("owned") if isinstance(batch.extras, dict) else None
    if owned is not None:  # a window: only its whole episodes ending in the newest chunk
        complete = owned > 0
    member = (complete & is_start).astype(jnp.float32)  # one entry per segment
    count = jnp.sum(member)
    safe = jnp.maximum(count, 1.0)
    mean = jnp.sum(seg * member) / safe
    std = jnp.sqrt(jnp.sum(jnp.square(seg - mean) * member) / safe)
    weights = complete.astype(jnp.float32)
    adv = (seg - mean) / (std + eps) * weights
    return adv, weights, count


def owned_only(adv: jnp.ndarray, batch: Transition) -> jnp.ndarray:
    """Advantages [T, N] times the weights of a whole-episode window (`extras["owned"]`:
    W on the steps it trains, 0 elsewhere; see `distrl.agents.episodes`); unchanged
    for a batch without them."""
    owned = batch.extras.get("owned") if isinstance(batch.extras, dict) else None
    return adv if owned is None else adv * owned


def normalize(adv: jnp.ndarray, weights: jnp.ndarray, eps: float = 1e-8) -> jnp.ndarray:
    """Zero-mean unit-std advantages over entries with weight > 0."""
    total = jnp.maximum(jnp.sum(weights), 1.0)
    mean = jnp.sum(adv * weights) / total
    std = jnp.sqrt(jnp.sum(jnp.square(adv - mean) * weights) / total)
    return (adv - mean) / (std + eps) * weights
