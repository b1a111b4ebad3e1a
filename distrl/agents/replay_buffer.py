"""A fixed-size circular replay buffer held in JAX arrays (pure functions).

Used by the single-process trainer (`distrl.local`), where adding and sampling run
inside the same jitted step as the rollout and the DQN updates. The distributed
system replays through Reverb instead (`distrl.replay`).
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp

from distrl.types import QTransition


class ReplayBuffer(NamedTuple):
    """Fixed-size circular buffer of items (QTransition, or R2D2's sequences) in JAX arrays."""

    data: QTransition  # fields [C, ...]
    position: jnp.ndarray  # int32 [], next slot to write
    size: jnp.ndarray  # int32 [], filled slots


def replay_init(example: QTransition, capacity: int) -> ReplayBuffer:
    """An empty buffer of `capacity` slots shaped like one `example` transition."""
    data = jax.tree.map(
        lambda x: jnp.zeros((capacity,) + jnp.shape(x), jnp.asarray(x).dtype), example
    )
    return ReplayBuffer(data, jnp.zeros((), jnp.int32), jnp.zeros((), jnp.int32))


def replay_add(buffer: ReplayBuffer, items: QTransition) -> ReplayBuffer:
    """Writes items [M] (M <= capacity) after the last write, overwriting the oldest."""
    capacity = jax.tree.leaves(buffer.data)[0].shape[0]
    num = jax.tree.leaves(items)[0].shape[0]
    index = (buffer.position + jnp.arange(num)) % capacity  # [M]
    data = jax.tree.map(lambda d, x: d.at[index].set(x), buffer.data, items)
    return ReplayBuffer(
        data, (buffer.position + num) % capacity, jnp.minimum(buffer.size + num, capacity)
    )


def replay_sample(buffer: ReplayBuffer, key: jax.Array, batch_size: int) -> QTransition:
    """Uniform sample [batch_size] from the filled slots (with replacement)."""
    index = jax.random.randint(key, (batch_size,), 0, jnp.maximum(buffer.size, 1))
    return jax.tree.map(lambda d: d[index], buffer.data)
