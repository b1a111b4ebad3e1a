"""A fixed-size circular replay buffer held in JAX arrays (pure functions).

Used by the single-process trainer (`distrl.local`), where adding and sampling run
inside the same jitted step as the rollout and the DQN updates. The distributed
system replays through Reverb instead (`distrl.replay`). Items are stored as packed
rows (`distrl.agents.rows`): one scatter per add and one gather per sample.
"""

import dataclasses

import jax
import jax.numpy as jnp

from distrl.agents import rows as rows_lib
from distrl.types import QTransition


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class ReplayBuffer:
    """Fixed-size circular buffer of items (QTransition, or R2D2's sequences)."""

    rows: jax.Array  # uint32 [C, F]: each slot's item packed (`rows.pack`)
    position: jax.Array  # int32 [], next slot to write
    size: jax.Array  # int32 [], filled slots
    layout: rows_lib.Layout = dataclasses.field(metadata=dict(static=True))

    @property
    def data(self) -> QTransition:
        """Every slot's item, fields [C, ...]."""
        return rows_lib.unpack(self.rows, self.layout)


def replay_init(example: QTransition, capacity: int) -> ReplayBuffer:
    """An empty buffer of `capacity` slots shaped like one `example` item."""
    layout = rows_lib.layout_of(example, lead=0)
    empty = jnp.zeros((capacity, rows_lib.width(layout)), jnp.uint32)
    return ReplayBuffer(empty, jnp.zeros((), jnp.int32), jnp.zeros((), jnp.int32), layout)


def replay_add(buffer: ReplayBuffer, items: QTransition) -> ReplayBuffer:
    """Writes items [M] (M <= capacity) after the last write, overwriting the oldest."""
    capacity = buffer.rows.shape[0]
    num = jax.tree.leaves(items)[0].shape[0]
    index = (buffer.position + jnp.arange(num)) % capacity  # [M]
    return dataclasses.replace(
        buffer,
        rows=buffer.rows.at[index].set(rows_lib.pack(items)),
        position=(buffer.position + num) % capacity,
        size=jnp.minimum(buffer.size + num, capacity),
    )


def replay_sample(buffer: ReplayBuffer, key: jax.Array, batch_size: int) -> QTransition:
    """Uniform sample [batch_size] from the filled slots (with replacement)."""
    index = jax.random.randint(key, (batch_size,), 0, jnp.maximum(buffer.size, 1))
    return rows_lib.unpack(buffer.rows[index], buffer.layout)
