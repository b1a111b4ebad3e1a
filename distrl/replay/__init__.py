"""Stage 5 of the data flow: the only package that knows Reverb's client API.

Split by job; what an item holds and how a batch is read comes from the pipeline
(`distrl.pipelines`), so nothing here branches on the kind of data:
- `connection`: a node's way to the server, its reconnect after an outage, table stats.
- `writer`: an actor's items into the table (`Writer`).
- `dataset`: the learner's prefetching reads (`iterate_batches`), by a `Reading` plan.
- `priorities`: prioritized replay's importance weights and priority updates.
- `checkpoints`: the server's checkpointer and checkpoint requests.
"""

import tensorflow as tf

TABLE = "experience"  # every pipeline's one table: the replay table or the on-policy queue


def signature(example):
    """tf.TensorSpec pytree of one item, from the pipeline's zero example item: what
    actors write, the table holds and the learner reads."""
    return tf.nest.map_structure(lambda x: tf.TensorSpec(x.shape, tf.as_dtype(x.dtype)), example)


# The public names, so that callers say `replay.Writer` rather than the module path.
from distrl.replay.checkpoints import checkpoint, make_checkpointer  # noqa: E402
from distrl.replay.connection import (  # noqa: E402
    Connection,
    answers,
    table_stats,
    target_forms,
    wait_for_server,
)
from distrl.replay.dataset import Reading, iterate_batches, make_dataset  # noqa: E402
from distrl.replay.priorities import (  # noqa: E402
    PriorityUpdater,
    importance_exponent,
    importance_weights,
    transition_weights,
)
from distrl.replay.writer import Writer  # noqa: E402

__all__ = [
    "TABLE",
    "Connection",
    "PriorityUpdater",
    "Reading",
    "Writer",
    "answers",
    "checkpoint",
    "importance_exponent",
    "importance_weights",
    "iterate_batches",
    "make_checkpointer",
    "make_dataset",
    "signature",
    "table_stats",
    "target_forms",
    "transition_weights",
    "wait_for_server",
]
