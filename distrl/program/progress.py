"""Stage 8, launcher side: one progress line for the whole program, and the summary.

Under local_mp the launcher process only waits while the nodes run (each node's
own output goes to `<run_dir>/logs/nodes/`). `ProgressLine` reads the evaluator's
latest metrics row (`logs/evaluator.csv`) once a second and shows one line:
elapsed time, env steps and env steps/s, learner updates and updates/s, the
latest greedy success rate (with the exact one where logged), and what is left of
the budget. On a terminal the
line is redrawn in place; into a file or a pipe a plain line is printed every
`plain_every` seconds instead, so logs stay readable. The final summary is
`distrl.records.results.summary`.
"""

import os
import threading
import time

from distrl import metrics
from distrl.evaluator_config import success_target
from distrl.metrics import human
from distrl.records import rundir

_CLEAR_LINE = "\r\x1b[K"


def budget_left(config, row) -> str:
    """What remains of each limit the config sets, e.g. '1.2M steps, 240 s'."""
    b, parts = config.budget, []
    if b.env_steps:
        parts.append(f"{human(max(b.env_steps - row['env_steps'], 0))} steps")
    if b.learner_steps:
        parts.append(f"{human(max(b.learner_steps - row['learner_steps'], 0))} updates")
    if b.seconds:
        parts.append(f"{max(b.seconds - row['elapsed'], 0):.0f} s")
    if config.evaluator.target_of_optimal:
        figure = "the optimal return" if _on_return(config) else "optimal success"
        parts.append(f"or {100 * config.evaluator.target_of_optimal:.0f}% of {figure}")
    elif success_target(config, "success_rate" in row):  # rows of envs without one lack it
        parts.append(f"or success {success_target(config, True):.2f}")
    if config.evaluator.target_return:
        parts.append(f"or return {config.evaluator.target_return:+g}")
    return ", ".join(parts)


def format_line(row, config, launcher_seconds: float) -> str:
    """The progress line of the evaluator's latest row (or a start-up note without one)."""
    if not row:
        return f"[{launcher_seconds:5.0f}s] starting {config.num_actors + 4} nodes ..."
    on_return = _on_return(config)
    return (
        f"[{row['elapsed']:5.0f}s] env steps {human(row['env_steps']):>6}"
        f" ({human(row['env_steps_per_s'])}/s)"
        f"  updates {human(row['learner_steps']):>6} ({human(row['updates_per_s'])}/s)"
        f"  {_figure(row, on_return)}{_exact_note(row, on_return)}"
        f"  left: {budget_left(config, row)}"
    )


def _on_return(config) -> bool:
    """The run's target is a fraction of the optimal return (not of the success)."""
    e = config.evaluator
    return bool(e.target_of_optimal) and e.optimal_measure == "return"


def _figure(row, on_return: bool = False) -> str:
    """The greedy success rate, or the mean return for an env without a success signal
    (its rows have no success column) or a run on the optimal return."""
    if row.get("success_rate") is not None and not on_return:
        return f"success {row['success_rate']:.3f}"
    return f"return {row['mean_return']:+.2f}"


def _exact_note(row, on_return: bool = False) -> str:
    """' (exact 0.874 of 0.890)' when the row carries the exact figures (the mean
    return's, ' (exact +7.12 of +7.93)', on the optimal return), else ''."""
    name, form = ("return", "+.2f") if on_return else ("success", ".3f")
    mine, best = row.get(f"exact_{name}"), row.get(f"optimal_{name}")
    if mine is None or best is None:
        return ""
    return f" (exact {mine:{form}} of {best:{form}})"


class ProgressLine:
    """Context manager: a thread that shows the run's progress until exit."""

    def __init__(
        self, run_dir: str, config, stream, period: float = 1.0, plain_every: float = 10.0
    ):
        self._csv = metrics.csv_path(run_dir, "evaluator")
        self._run_dir = run_dir
        self._config = config
        self._stream = stream
        self._period = period
        self._plain_every = plain_every
        self._tty = hasattr(stream, "isatty") and stream.isatty()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="progress", daemon=True)
        self._start = time.time()
        self._last_plain = -float("inf")
        self._printed = None  # the last plain line, not repeated at exit
        self._drawn = False

    def __enter__(self):
        nodes = os.path.join(self._run_dir, rundir.NODE_OUTPUT_DIR)
        self._print(f"distrl: run directory {self._run_dir} (node output: {nodes}*)")
        self._thread.start()
        return self

    def __exit__(self, *exc_info):
        self._stop.set()
        self._thread.join()
        self.tick()  # the last row the evaluator wrote
        if self._tty and self._drawn:
            self._stream.write("\n")
            self._stream.flush()

    def tick(self) -> None:
        """Draws the latest state once."""
        row = metrics.last_row(self._csv)
        if row.get("time", 0.0) < self._start:  # a resumed run's earlier launch
            row = {}
        line = format_line(row, self._config, time.time() - self._start)
        if self._tty:
            self._stream.write(_CLEAR_LINE + line)
            self._stream.flush()
            self._drawn = True
        elif time.time() - self._last_plain >= self._plain_every or (
            self._stop.is_set() and line != self._printed
        ):
            self._print(line)
            self._printed, self._last_plain = line, time.time()

    def note(self, text: str) -> None:
        """A message on its own line; a terminal's progress line is redrawn below it."""
        if self._tty:
            self._stream.write(_CLEAR_LINE)
        self._print(text)

    def _loop(self) -> None:
        while not self._stop.wait(self._period):
            try:
                self.tick()
            except OSError:  # a metrics file being rotated or a closed stream: try again
                pass

    def _print(self, line: str) -> None:
        self._stream.write(line + "\n")
        self._stream.flush()
