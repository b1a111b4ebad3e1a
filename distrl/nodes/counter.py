"""Stage 6 of the data flow: the counter node, the program's shared tally.

Actors add env steps, episodes and items written, the learner adds updates, items
learned from, the data age sum and maximum, and its parameter version, the
evaluator reads the totals to decide when the budget is spent. One small RPC
object behind a lock; courier serves its public methods. A resumed run
starts it from the totals in the learner's checkpoint, so counts continue.
"""

import threading
import time
from typing import Dict, Optional


class Counter:
    """Sums of named counts from every node (`increment`), read with `get_counts`."""

    def __init__(self, initial_counts: Optional[Dict[str, float]] = None):
        self._lock = threading.Lock()
        self._counts: Dict[str, float] = dict(initial_counts or {})
        self._start = time.time()

    def increment(self, **deltas: float) -> Dict[str, float]:
        """Adds each delta to its count; returns the new totals."""
        with self._lock:
            for name, delta in deltas.items():
                self._counts[name] = self._counts.get(name, 0) + delta
            return dict(self._counts)

    def set(self, **values: float) -> None:
        """Records the latest value of each name (a version, a loss), not a sum."""
        with self._lock:
            self._counts.update(values)

    def maximum(self, **values: float) -> None:
        """Keeps the largest value seen of each name (e.g. the oldest data's age)."""
        with self._lock:
            for name, value in values.items():
                self._counts[name] = max(self._counts.get(name, value), value)

    def get_counts(self) -> Dict[str, float]:
        """All totals, plus the seconds since the counter started."""
        with self._lock:
            return dict(self._counts, counter_seconds=time.time() - self._start)



def data_summary(counts: Dict[str, float]) -> Dict[str, float]:
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
