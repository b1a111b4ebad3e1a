"""Prioritized replay: importance-sampling weights and the table's priority updates."""

import queue
import threading

import jax
import numpy as np
from absl import logging

from distrl.replay import TABLE
from distrl.replay.connection import Connection


def importance_exponent(config, updates: int) -> float:
    """beta after `updates` updates: linear from `replay.importance_exponent` to 1 over
    `replay.importance_anneal_updates`."""
    beta0, anneal = config.replay.importance_exponent, config.replay.importance_anneal_updates
    if not anneal:
        return float(beta0)
    return float(beta0 + (1.0 - beta0) * min(updates / anneal, 1.0))


def importance_weights(info, beta: float) -> np.ndarray:
    """Prioritized replay's importance-sampling weights [K] of a sampled batch.

    w_i = (N * P(i)) ** -beta, over the batch's largest weight (so weights only
    shrink updates), with P(i) the item's sampling probability and N the table size
    when it was sampled (`SampleInfo.probability`, `SampleInfo.table_size`).
    """
    w = (np.asarray(info.table_size, np.float64) * np.asarray(info.probability)) ** -beta
    return (w / np.max(w)).astype(np.float32)


def transition_weights(info, beta: float, per_item: int) -> np.ndarray:
    """The importance weights of a sampled batch per transition, [K * per_item]: each
    item's weight (`importance_weights`) for each of its `per_item` transitions, which
    the pipeline's `learner_batch` keeps consecutive."""
    return np.repeat(importance_weights(info, beta), per_item)


# A priority update not done after this long, while the server does not answer either,
# is given up (a healthy one takes milliseconds) and made again after a reconnect.
_PATIENCE_S = 1.0


class PriorityUpdater:
    """Writes new item priorities to the table from a background thread.

    `submit(keys [K], priorities [K * k * B])` returns at once (the arrays may still
    be on the device; they are fetched in the thread), so the learner's next update
    does not wait for Reverb. An item holds k x B transitions, consecutive in the
    batch (the pipeline's `learner_batch`): its priority is the largest of theirs (floored at
    1e-6 so that no item becomes unsampleable). `max_priority` is the largest item
    priority written so far (1.0 before the first), what new items are inserted
    at. At most `max_pending` updates wait; beyond that `submit` blocks, so a slow
    server slows the learner instead of growing a backlog of stale priorities.

    Updates go through `connection` (`Connection.call`): a replay restarted during
    the run costs the update in hand a reconnect (shared with the learner's
    dataset and checkpoints), not gRPC's reconnect backoff (Reverb's
    `mutate_priorities` waits, without a deadline, for the old connection until
    seconds after the server is back: an update taking `_PATIENCE_S` while the
    server does not answer is made again on the renewed connection).
    """

    def __init__(self, connection: Connection, max_pending: int = 8):
        self._connection = connection
        self._queue = queue.Queue(max_pending)
        self._max = None
        self.written = 0  # updates applied, for tests and metrics
        self._thread = threading.Thread(target=self._loop, name="priority-updater", daemon=True)
        self._thread.start()

    @property
    def max_priority(self) -> float:
        return 1.0 if self._max is None else self._max

    def submit(self, keys, priorities) -> None:
        self._queue.put((keys, priorities))

    def _loop(self) -> None:
        while True:
            job = self._queue.get()
            if job is None:
                return
            keys, priorities = jax.device_get(job)
            keys = np.asarray(keys)
            priorities = np.asarray(priorities, np.float64).reshape(len(keys), -1)
            priorities = np.maximum(np.max(priorities, axis=1), 1e-6)  # [K]
            self._max = max(self._max or 0.0, float(np.max(priorities)))
            updates = dict(zip(keys.tolist(), priorities.tolist()))
            try:
                self._connection.call(
                    lambda client, u=updates: client.mutate_priorities(TABLE, updates=u),
                    "a priority update",
                    patience_s=_PATIENCE_S,
                )
                self.written += 1
            except Exception as err:  # noqa: BLE001 - a stopping server: nothing to update
                logging.info("replay: priority update failed (%s)", err)

    def close(self, timeout_s: float = 3.0) -> None:
        """Applies what is pending (up to `timeout_s`) and stops the thread."""
        self._queue.put(None)
        self._thread.join(timeout_s)
