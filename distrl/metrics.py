"""Observability, every node: one node's metric rows as CSV and TensorBoard scalars.

Each node that has numbers to report (actors, learner, evaluator, and the replay
monitor inside the evaluator) owns one `MetricsLogger`, which appends rows to
`<run_dir>/logs/<node>.csv` and writes the same numbers as TensorBoard scalars
under `<run_dir>/tb/<node>/`. The CSV serves scripts (plots, comparisons, the
launcher's progress line); the event files serve TensorBoard. TensorFlow's own
summary writer makes the event files (TF is loaded in every node for Reverb
anyway), so nothing here hand-rolls that format.

Rows are flushed as they are written, so a killed node loses at most the row it
was writing, and a resumed run appends to the same files (its steps continue).
"""

import collections
import csv
import math
import os
import time
from collections.abc import Mapping

import numpy as np

from distrl.errors import check

LOGS_DIR = "logs"
TB_DIR = "tb"
FIELDS = {"log": dict(every_seconds=2.0)}  # between a node's metric rows


def section_defaults(agent_config) -> dict:
    """The log section with its defaults (any agent's)."""
    return FIELDS


def check_section(experiment) -> None:
    """ConfigError unless config.log (each node's row period) can work."""
    every = experiment.config.log.every_seconds
    check(every > 0, f"config.log.every_seconds={every}; need > 0")


def csv_path(run_dir: str, node: str) -> str:
    """Where node `node` (e.g. 'actor_0', 'learner') keeps its metric rows."""
    return os.path.join(run_dir, LOGS_DIR, f"{node}.csv")


def human(x: float) -> str:
    """A count in a few characters: 950, 12.3k, 4.56M."""
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= scale:
            return f"{x / scale:.3g}{suffix}"
    return f"{x:.0f}"


class MetricsLogger:
    """Appends one node's rows to its CSV and its TensorBoard directory.

    Every row gets `step` (the node's own x-axis: env steps for actors and the
    evaluator, updates for the learner) and `time` (Unix seconds). The CSV columns
    are fixed by the first row (or by the existing header when a resumed run
    appends); later rows fill missing columns with blanks and drop new ones, so a
    reader never meets a ragged file.
    """

    def __init__(self, run_dir: str, node: str, every_seconds: float = 0.0):
        self.node = node
        self._csv_path = csv_path(run_dir, node)
        self._tb_dir = os.path.join(run_dir, TB_DIR, node)
        self._every = every_seconds
        self._last = -math.inf
        self._file = None
        self._csv = None
        self._tb = None

    def due(self) -> bool:
        """True when `every_seconds` have passed since the last row."""
        return time.time() - self._last >= self._every

    def write(self, step: int, row: Mapping[str, float]) -> None:
        """Writes one row of scalars (numbers, numpy or jax scalars) at `step`."""
        self._last = time.time()
        values = {name: float(value) for name, value in row.items()}
        self._write_csv(dict(step=int(step), time=self._last, **values))
        self._write_tb(int(step), values)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        if self._tb is not None:
            self._tb.close()
            self._tb = None

    def _write_csv(self, row: dict[str, float]) -> None:
        if self._csv is None:
            self._open_csv(list(row))
        self._csv.writerow(row)
        self._file.flush()

    def _open_csv(self, fields) -> None:
        """Opens for appending; a resumed run keeps the header it finds."""
        os.makedirs(os.path.dirname(self._csv_path), exist_ok=True)
        existing = _read_header(self._csv_path)
        # Open for the node's lifetime (closed by close()), so each row is one write.
        self._file = open(self._csv_path, "a", newline="")  # noqa: SIM115
        if existing:
            fields = existing
            self._file.write("\n" if not _ends_with_newline(self._csv_path) else "")
        self._csv = csv.DictWriter(self._file, fieldnames=fields, extrasaction="ignore")
        if not existing:
            self._csv.writeheader()

    def _write_tb(self, step: int, values: dict[str, float]) -> None:
        import tensorflow as tf

        if self._tb is None:
            self._tb = tf.summary.create_file_writer(self._tb_dir)
        with self._tb.as_default():
            for name, value in values.items():
                tf.summary.scalar(name, value, step=step)
        self._tb.flush()


class Deltas:
    """Differences of cumulative counts between two calls, and the seconds between.

    Nodes keep running totals (env steps, updates, Reverb's insert counts); a log
    row wants what happened since the previous row, and rates per second.
    """

    def __init__(self, totals: Mapping[str, float] | None = None):
        self._last = dict(totals or {})
        self._time = time.time()

    def step(self, totals: Mapping[str, float]):
        """({name: total - previous total}, seconds since the previous call)."""
        now = time.time()
        deltas = {k: v - self._last.get(k, 0.0) for k, v in totals.items()}
        seconds = max(now - self._time, 1e-9)
        self._last, self._time = dict(totals), now
        return deltas, seconds


class RateWindow:
    """Per-second rates of cumulative counts over the last `seconds`.

    Counts reach the counter in bursts (each node reports every 0.5 s), so a rate
    between two evaluations a second apart jitters; a few seconds' window does not.
    """

    def __init__(self, seconds: float = 5.0):
        self._seconds = seconds
        self._points = collections.deque()

    def rates(self, totals: Mapping[str, float], now: float | None = None):
        """{name: per-second rate}; zeros on the first call."""
        now = time.time() if now is None else now
        self._points.append((now, dict(totals)))
        while len(self._points) > 2 and now - self._points[1][0] >= self._seconds:
            self._points.popleft()
        start, first = self._points[0]
        seconds = now - start
        if seconds <= 0:
            return {name: 0.0 for name in totals}
        return {name: (value - first.get(name, 0.0)) / seconds for name, value in totals.items()}


def read_csv(path: str) -> dict[str, np.ndarray]:
    """A metrics CSV as {column: float array}; blanks and unparsable cells are NaN.

    Skips rows of the wrong length (a row cut short by a killed process).
    """
    header = _read_header(path)
    if not header:
        return {}
    rows = []
    with open(path, newline="") as f:
        reader = csv.reader(f)
        next(reader, None)
        for row in reader:
            if len(row) == len(header):
                rows.append([_to_float(cell) for cell in row])
    data = np.asarray(rows, np.float64).reshape(-1, len(header))
    return {name: data[:, i] for i, name in enumerate(header)}


def last_row(path: str) -> dict[str, float]:
    """The last complete row of a metrics CSV as {column: float}, or {} if none."""
    columns = read_csv(path)
    if not columns or not len(next(iter(columns.values()))):
        return {}
    return {name: float(values[-1]) for name, values in columns.items()}


def _read_header(path: str):
    if not os.path.exists(path) or os.path.getsize(path) == 0:
        return None
    with open(path, newline="") as f:
        return next(csv.reader(f), None)


def _ends_with_newline(path: str) -> bool:
    with open(path, "rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1) == b"\n"


def _to_float(cell: str) -> float:
    try:
        return float(cell)
    except ValueError:
        return math.nan
