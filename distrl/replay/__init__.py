"""Stage 5 of the data flow: the only package that knows Reverb's client API.

Split by job; what an item holds and how a batch is read comes from the pipeline
(`distrl.pipelines`), so nothing here branches on the kind of data:
- `connection`: a node's way to the server, its reconnect after an outage, table stats.
- `tables`: the tables a pipeline asks for, and its items' signature.
- `writer`: an actor's items into the table (`Writer`).
- `dataset`: the learner's prefetching reads (`iterate_batches`), by a `Reading` plan
  (`reading`).
- `priorities`: prioritized replay's importance weights and priority updates.
- `checkpoints`: the server's checkpointer and checkpoint requests.

Importing the package loads neither Reverb nor TensorFlow: the pipelines, which the
core (`distrl.local`, the agents' configs) imports, name `TABLE` and `Reading` only.
Every other public name is loaded with its module on first use (PEP 562), so a
caller still says `replay.Writer` and only the distributed layer pulls Reverb in.
"""

import importlib

TABLE = "experience"  # every pipeline's one table: the replay table or the on-policy queue

from distrl.replay.reading import Reading  # noqa: E402

# {public name: the module that defines it}, imported when the name is first used.
_LAZY = {
    "checkpoint": "checkpoints",
    "make_checkpointer": "checkpoints",
    "Connection": "connection",
    "answers": "connection",
    "table_stats": "connection",
    "target_forms": "connection",
    "wait_for_server": "connection",
    "iterate_batches": "dataset",
    "make_dataset": "dataset",
    "PriorityUpdater": "priorities",
    "importance_exponent": "priorities",
    "importance_weights": "priorities",
    "transition_weights": "priorities",
    "queue_table": "tables",
    "replay_table": "tables",
    "signature": "tables",
    "Writer": "writer",
}


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list:
    return sorted(__all__)


__all__ = ["TABLE", "Reading", *_LAZY]
