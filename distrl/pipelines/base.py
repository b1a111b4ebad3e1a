"""What every pipeline provides (`Pipeline`): one object per way data travels from the
actors to the learner, asked by every stage instead of branching on the kind.

A pipeline owns its config fields (with their defaults, merged into
`distrl.config.base_config`) and their validation, the Reverb item an actor writes
(`example_item`; the table signature and memory estimate derive from it) and the
table that holds it, the actor's jitted item function and how its items are
written, how the learner reads and reshapes a batch, and the single-process
trainer's data step (`distrl.local`). Methods take the experiment config, the agent
config and the env (of the interface, `distrl.envs.interface`: items take the shape
and dtype of their observations from its `spec`) they need; none imports the config
module, which imports this package.
"""

import abc
from typing import Any

import jax
import numpy as np

from distrl import replay
from distrl.agents import PipelineKind


def zeros(shape, dtype) -> np.ndarray:
    """A read-only zero array that takes no memory (a broadcast scalar): example items
    only describe shapes, and the memory estimate sizes items of configs it refuses."""
    return np.broadcast_to(np.zeros((), dtype), shape)


def whole_batches(per_batch: int, config, consumed: bool) -> replay.Reading:
    """Reads of one whole batch of `per_batch` items, one batch in flight unless
    `learner.max_in_flight` says (chunks and sequences: items large beside a read)."""
    return replay.Reading(
        items_per_batch=per_batch,
        batches_per_read=1,
        in_flight=config.learner.max_in_flight or per_batch,
        prefetch=config.learner.prefetch,
        consumed=consumed,
    )


class Pipeline(abc.ABC):
    """The protocol; `transitions.Transitions`, `chunks.Chunks`, `episodes.Episodes`
    and `sequences.Sequences` implement it."""

    kind: PipelineKind  # the agents' name for it (an agent config's `pipeline`)
    # {config section: {field: default}} of the fields only this pipeline reads; the
    # comments beside them are their documentation
    FIELDS: dict[str, dict[str, Any]] = {}
    unroll_length: int = 16  # T, env steps per rollout chunk, unless the config says
    carries_core_state: bool = False  # its items hold a recurrent core's state (CHUNKS)

    @abc.abstractmethod
    def validate(self, config, agent_config, env) -> None:
        """ConfigError for a value of this pipeline's fields that cannot work."""

    # -- items and their table
    @abc.abstractmethod
    def example_item(self, config, env):
        """A zero `Versioned` pytree shaped like one Reverb item (numpy, `zeros`)."""

    def signature(self, config, env):
        """The tf.TensorSpec pytree of one item: what actors write, the learner reads."""
        return replay.signature(self.example_item(config, env))

    @abc.abstractmethod
    def make_tables(self, config, env) -> list:
        """The Reverb tables this pipeline's items go into (inside the replay node)."""

    @abc.abstractmethod
    def transitions_per_item(self, config) -> int:
        """New env steps (of one env) one item adds: k x B or T x B."""

    @abc.abstractmethod
    def items_per_batch(self, config) -> int:
        """Reverb items in one learner batch."""

    def item_bytes(self, config, env) -> int:
        """Bytes of one item (its example's leaves)."""
        return int(
            sum(np.asarray(x).nbytes for x in jax.tree.leaves(self.example_item(config, env)))
        )

    # -- the actor
    @abc.abstractmethod
    def item_fn(self, agent_config, config, env):
        """`(tail, chunk) -> (items, tail)`: what one rollout chunk `Transition` [T, B]
        writes, and what it carries to the next chunk (None at first)."""

    @abc.abstractmethod
    def write(self, writer: "replay.Writer", items, version: int) -> None:
        """Writes `item_fn`'s items (numpy), stamped with the params version."""

    def weights_per_item(self, config) -> int:
        """Rows of the agent's batch per item, each weighted by the item's importance
        weight under prioritized replay (`replay.transition_weights`)."""
        return self.transitions_per_item(config)

    def prioritized(self, config) -> bool:
        """Whether items carry priorities the learner updates (prioritized replay)."""
        return False

    # -- the learner
    @abc.abstractmethod
    def reading(self, config) -> replay.Reading:
        """How the learner's dataset reads the table (`replay.Reading`)."""

    @abc.abstractmethod
    def learner_batch(self, data):
        """A sampled batch (a `Versioned`'s data, leading [items]) -> the agent's batch."""

    @abc.abstractmethod
    def batch_rows(self, config) -> int:
        """Transitions in one learner batch (for the memory estimate)."""

    # -- the memory estimate (`distrl.resources`)
    @abc.abstractmethod
    def stored(self, config, env, local: bool) -> tuple:
        """(bytes, what drives them) of what the table holds at its fullest."""

    # -- the single-process trainer (`distrl.local`); `cfg` is its `Settings`
    @abc.abstractmethod
    def local_updates(self, config) -> int:
        """Updates per iteration (one rollout of every env)."""

    def local_batch(self, config) -> int:
        """Samples per update of the trainer's replay buffer (a replay pipeline's)."""
        return config.learner.batch_size

    @abc.abstractmethod
    def local_init(self, env, agent, cfg, state, rollout_carry, key) -> tuple:
        """(rollout carry, data carry, env steps taken): what the trainer keeps between
        iterations besides the agent (jittable)."""

    def local_warm_up(self, agent_config) -> str:
        """What `local_init` acts before the first iteration, in a few words ("": nothing,
        so `rollout_carry` may be None: an env stepped in Python, `distrl.local_host`)."""
        del agent_config
        return ""

    @abc.abstractmethod
    def local_learn(self, agent, cfg, state, data, chunk, key) -> tuple:
        """(state, data): an iteration's updates on its rollout chunk [T, B] (jittable)."""

    # -- descriptions for reports (`launch/compare.py`)
    @abc.abstractmethod
    def describe(self, config) -> str:
        """The table in a few words, e.g. "queue (size 4)"."""

    @abc.abstractmethod
    def describe_batch(self, config) -> str:
        """The learner batch in a few words, e.g. "256 transitions"."""
