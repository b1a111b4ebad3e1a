"""Stage 6 of the data flow: the counter node, the program's shared tally.

Actors add env steps and episodes, the learner adds updates and its parameter
version, the evaluator reads the totals to decide when the budget is spent. One
small RPC object behind a lock; courier serves its public methods. A resumed run
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

    def get_counts(self) -> Dict[str, float]:
        """All totals, plus the seconds since the counter started."""
        with self._lock:
            return dict(self._counts, counter_seconds=time.time() - self._start)

