"""Stage 6, learner side: the learner's batches, grouped per jitted call and on their
way to the device before the update that uses them.

The feed takes sampled batches from the replay reader (`replay.iterate_batches`),
groups `learner.updates_per_call` of them, reshapes each into the agent's batch,
stacks a group into one `[K, ...]` batch, and starts its copy to the learner's device
(`jax.device_put` returns at once). Reading a replay table, a thread of its own
prepares the next group while the learner runs an update, so the copy overlaps the
update. Reading a queue, it prepares a group only when the learner asks: a chunk
taken from the queue ahead of its update would age there (on-policy data is fresh).
On a CPU learner nothing is copied (the jitted update takes numpy as it is).
"""

import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import jax
import numpy as np


class Group(NamedTuple):
    """What one jitted call learns from."""

    samples: list  # the replay samples, in the order they were read (their info and versions)
    batch: Any  # the agent's batch: one update's, or [K, ...] stacked for K updates


def stack(batches: list):
    """K batches of one structure -> one batch of [K, ...] leaves."""
    return jax.tree.map(lambda *leaves: np.stack(leaves), *batches)


class Feed:
    """`next(feed)` -> the next `Group`, or StopIteration once the reader ended.

    reader: yields (sample, seconds waited), as `replay.iterate_batches`.
    to_batch: a sample's data -> the agent's batch (the pipeline's `learner_batch`).
    per_call: samples per group (K); the group's batch is stacked when K > 1.
    put: starts a batch's copy to the device (identity on a CPU learner).
    should_stop: ends the wait for a group once the program stops.
    ahead: prepare the next group in a thread while the learner runs (replay tables).
    """

    def __init__(
        self,
        reader: Iterator,
        to_batch: Callable,
        per_call: int,
        put: Callable,
        should_stop: Callable[[], bool],
        ahead: bool = True,
    ):
        self._reader, self._to_batch, self._per_call, self._put = reader, to_batch, per_call, put
        self._should_stop = should_stop
        self._ready = queue.Queue(maxsize=1)  # one group ahead: its copy overlaps an update
        self._error = None
        self._thread = None
        if ahead:
            self._thread = threading.Thread(target=self._fill, name="learner feed", daemon=True)
            self._thread.start()

    def __iter__(self):
        return self

    def __next__(self) -> Group:
        if self._thread is None:
            group = self._group()
            if group is None:
                raise StopIteration
            return group
        group = self._take()
        if group is None:
            if self._error is not None:
                raise self._error
            raise StopIteration
        return group

    def _take(self) -> Group | None:
        """The next prepared group; None once the filling thread has ended and left
        none (its last word, None, may not fit when the program stopped)."""
        while True:
            try:
                group = self._ready.get(timeout=0.2)
            except queue.Empty:
                if self._thread.is_alive():
                    continue
                return None
            if group is None:
                self._thread.join()
            return group

    def _fill(self) -> None:
        try:
            while (group := self._group()) is not None:
                if not self._offer(group):
                    return
        except Exception as err:  # noqa: BLE001 - raised again in the learner's thread
            self._error = err
        self._offer(None)

    def _offer(self, item) -> bool:
        """Puts `item` once there is room; False when the program stopped first (the
        learner no longer takes groups)."""
        while not self._should_stop():
            try:
                self._ready.put(item, timeout=0.2)
                return True
            except queue.Full:
                continue
        try:
            self._ready.put_nowait(item)
        except queue.Full:
            pass
        return False

    def _group(self) -> Group | None:
        samples = []
        for sample, _ in self._reader:  # its wait: the learner times its own, `next(feed)`
            samples.append(sample)
            if len(samples) == self._per_call:
                break
        if len(samples) < self._per_call:  # the reader ended: a partial group is dropped
            return None
        batches = [self._to_batch(s.data.data) for s in samples]
        batch = batches[0] if self._per_call == 1 else stack(batches)
        return Group(samples, self._put(batch))


def device_put_for(platform: str) -> Callable:
    """How a learner on `platform` gets its batches onto its device: nothing to do on
    the CPU (the jitted update reads numpy in place; an explicit copy only costs),
    an asynchronous `jax.device_put` on an accelerator."""
    return (lambda batch: batch) if platform == "cpu" else jax.device_put
