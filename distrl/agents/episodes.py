"""Whole episodes across chunk boundaries, for the critic-free agents (REINFORCE, GRPO).

Their advantages need each episode's outcome, which a fixed-length chunk cuts off.
The actor therefore writes a sliding window of its last W chunks, [W * T, B], each
time a chunk is done, with `extras["owned"]` [W * T, B] weighting the steps that this
window trains: those of whole episodes (begun inside the window) that end in its
newest chunk get W, the rest 0, so that a loss's mean over the window weighs each
trained step as a mean over one chunk would (no more, relative to terms such as
the entropy bonus that average over every step). Every step of an episode that
fits in the window is trained exactly once, as soon as its episode ends; longer
episodes are not trained at all. Before the first W - 1 chunks exist, the window
is padded with one-step "episodes" that are never owned.
"""

import jax
import jax.numpy as jnp

from distrl.types import Transition


def owned_steps(last: jnp.ndarray, newest: int) -> jnp.ndarray:
    """[L, ...] episode ends -> [L, ...] float 1 where the step's episode began inside
    the window (a `last` precedes it) and ends in its final `newest` steps."""
    length = last.shape[0]
    index = jnp.arange(length).reshape((length,) + (1,) * (last.ndim - 1))
    never = jnp.full(last.shape[1:], length, jnp.int32)

    def backward(next_end, xs):  # index of the first episode end at or after t
        is_last, t = xs
        next_end = jnp.where(is_last, t, next_end)
        return next_end, next_end

    _, next_end = jax.lax.scan(
        backward, never, (last, jnp.broadcast_to(index, last.shape)), reverse=True
    )
    started = (jnp.cumsum(last, axis=0) - last) > 0  # a `last` strictly before t
    ends_newest = (next_end >= length - newest) & (next_end < length)
    return (started & ends_newest).astype(jnp.float32)


def pad(chunk: Transition, chunks: int) -> Transition:
    """`chunks` x T steps of never-owned one-step episodes shaped like `chunk` [T, B]."""
    zeros = jax.tree.map(lambda x: jnp.zeros((chunks * x.shape[0],) + x.shape[1:], x.dtype), chunk)
    return zeros._replace(last=jnp.ones_like(zeros.last))


def window(previous: Transition, chunk: Transition):
    """(previous [(W-1) T, B], chunk [T, B]) -> (window [W T, B] with extras["owned"],
    the next call's previous [(W-1) T, B])."""
    full = jax.tree.map(lambda a, b: jnp.concatenate([a, b], axis=0), previous, chunk)
    chunks = full.last.shape[0] // chunk.last.shape[0]  # W
    owned = chunks * owned_steps(full.last, chunk.last.shape[0])
    item = full._replace(extras=dict(full.extras, owned=owned))
    keep = previous.last.shape[0]
    return item, jax.tree.map(lambda x: x[x.shape[0] - keep :], full)
