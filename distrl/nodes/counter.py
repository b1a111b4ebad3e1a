"""Stage 6 of the data flow: the counter node, the program's shared tally.

Actors add env steps, episodes and items written, the learner adds updates, items
learned from, the data age sum and maximum, and its parameter version, the
evaluator reads the totals to decide when the budget is spent. One small RPC
object behind a lock; courier serves its public methods. A resumed run
starts it from the newer of the learner's checkpoint's totals and this file's
(`resumed_counts`), so counts continue and never go back, even after a kill that
came long after the last checkpoint.

With `state_path` every change is written there (a small JSON file, atomically
replaced) before anyone hears of it, and a counter restarted after its process
died (`lifecycle.attempt() > 0`) starts from that file: totals never go back.
Counts sent while it was down are lost (senders do not wait for it).
"""

import json
import os
import threading
import time

from distrl import files
from distrl.nodes import lifecycle


class Counter:
    """Sums of named counts from every node (`increment`), read with `get_counts`."""

    def __init__(
        self, initial_counts: dict[str, float] | None = None, state_path: str | None = None
    ):
        self._lock = threading.Lock()
        self._path = state_path
        self._counts: dict[str, float] = dict(initial_counts or {})
        if state_path:
            os.makedirs(os.path.dirname(state_path), exist_ok=True)
        if state_path and lifecycle.attempt() > 0 and os.path.exists(state_path):
            with open(state_path) as f:
                self._counts = json.load(f)
        self._start = time.time()
        self._save()

    def increment(self, **deltas: float) -> dict[str, float]:
        """Adds each delta to its count; returns the new totals."""
        return self.report(deltas, {}, {})

    def set(self, **values: float) -> None:
        """Records the latest value of each name (a version, a loss), not a sum."""
        with self._lock:
            self._counts.update(values)
            self._save()

    def report(
        self, sums: dict[str, float], latest: dict[str, float], maxima: dict[str, float]
    ) -> dict[str, float]:
        """A node's report in one step: adds `sums`, records `latest` (as `set`) and keeps
        the largest value seen of each of `maxima` (the oldest data's age); returns the new
        totals. One call, so that no reader sees the sums without their maxima (a mean
        data age above its max was read under load when they were separate calls)."""
        with self._lock:
            for name, delta in sums.items():
                self._counts[name] = self._counts.get(name, 0) + delta
            self._counts.update(latest)
            for name, value in maxima.items():
                self._counts[name] = max(self._counts.get(name, value), value)
            self._save()
            return dict(self._counts)

    def get_counts(self) -> dict[str, float]:
        """All totals, plus the seconds since the counter started."""
        with self._lock:
            return dict(self._counts, counter_seconds=time.time() - self._start)

    def _save(self) -> None:
        if not self._path:
            return
        files.write_json(self._path, self._counts)  # a death leaves the old or the new file


def state_file(run_dir: str) -> str:
    """Where the counter keeps its totals (every change), for its restart, a resume and
    new actors."""
    return os.path.join(run_dir, "checkpoints", "counter.json")


# Counts a learner checkpoint records exactly at its version (`learner._Report.counts`);
# the counter hears them up to 0.1 s later, so its file may be behind on these.
_EXACT_IN_CHECKPOINT = ("learner_steps", "param_version")


def resumed_counts(checkpointed: dict[str, float], state_path: str) -> dict[str, float]:
    """The totals a resumed run starts from: the counter's file (`state_path`), the
    newest record of every count (written at each change, before anyone heard of
    it, so never behind a checkpoint's copy of it), over the learner checkpoint's
    `checkpointed` counts, which a kill after that checkpoint leaves behind; the
    larger of the two for the counts a checkpoint records exactly. A missing or
    unreadable file leaves the checkpoint's counts."""
    try:
        latest = files.read_json(state_path)
    except (OSError, ValueError):
        latest = None
    if not isinstance(latest, dict):
        return dict(checkpointed)
    counts = {**checkpointed, **latest}
    for name in _EXACT_IN_CHECKPOINT:
        if name in checkpointed and name in latest:
            counts[name] = max(checkpointed[name], latest[name])
    return counts


def data_summary(counts: dict[str, float]) -> dict[str, float]:
    """What happened to the data, from the counter's totals (for result.json).

    data_age_mean / data_age_max: updates between the params an item was acted with
    and the update that learned from it; items_written: items the actors' writes
    confirmed; items_learned: items the learner's updates used (queue: equal to
    items_written up to what the queue and the learner held when the run stopped).
    """
    items = counts.get("learner_items", 0)
    return dict(
        data_age_mean=counts.get("data_age_sum", 0.0) / items if items else 0.0,
        data_age_max=counts.get("data_age_max", 0.0),
        items_written=counts.get("items_written", 0),
        items_learned=items,
    )
