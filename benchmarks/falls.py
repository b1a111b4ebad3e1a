"""Falls in a distributed run's evaluations, and what the learner logged before each:
to find the cause of the falls rather than hide them.

A fall: an evaluation below `--drop` times the mean of the `--window` evaluations
before it (the first of a row of such). The updates before it: the learner's rows
(`logs/learner.csv`) past the param version of the evaluation before (still above the
line), up to the fall's: their batches were gathered by a policy not yet fallen, so
what they show comes before the fall, not after it. For each metric, the largest
value in those rows is ranked among all the run's rows (0-1, the share at or below
it). Beside it, `chance`: the mean rank of the largest value of every span of as
many consecutive rows, the rank a fall's span would get if the metric had nothing to
do with the fall. A cause shows as ranks near 1 where chance is well below. Runs
measured so should log every update (`--config.log.every_seconds=0.1`).

    .venv/bin/python -m benchmarks.falls --run_dirs=runs/a,runs/b [--drop=0.5]
        [--window=4] [--metrics=approx_kl,clip_fraction,grad_norm,value_loss]
        [--column=mean_return] [--out=runs/falls.jsonl]

Prints one JSON line per fall and one per run (its falls' mean ranks and chance).
"""

import os
import sys

import numpy as np
from absl import flags

from benchmarks.common import emit_row
from distrl import cli, metrics


def fall_indices(values: np.ndarray, drop: float, window: int) -> list[int]:
    """Indices of the evaluations below `drop` x the mean of the `window` before them,
    the first of each row of such."""
    found, below_before = [], False
    for i in range(window, len(values)):
        below = values[i] < drop * values[i - window : i].mean()
        if below and not below_before:
            found.append(i)
        below_before = below
    return found


def rank(series: np.ndarray, value: float) -> float:
    """The share of `series` at or below `value`."""
    return float(np.mean(series <= value))


def chance_rank(series: np.ndarray, span: int) -> float:
    """The mean rank of the largest value of each span of `span` consecutive values."""
    peaks = np.lib.stride_tricks.sliding_window_view(series, span).max(axis=1)
    ordered = np.sort(series)
    return float(np.mean(np.searchsorted(ordered, peaks, side="right") / len(series)))


def analyse(run_dir: str, drop: float, window: int, names, column: str) -> tuple[list, dict]:
    """(one dict per fall, the run's summary) for `run_dir`."""
    logs = os.path.join(run_dir, "logs")
    evaluated = metrics.read_csv(os.path.join(logs, "evaluator.csv"))
    learned = metrics.read_csv(os.path.join(logs, "learner.csv"))
    missing = [n for n in names if n not in learned] + [column] * (column not in evaluated)
    if missing:
        raise ValueError(f"{run_dir}: no {', '.join(missing)} in its logs")
    keep = ~np.isnan(evaluated[column])
    values, versions = evaluated[column][keep], evaluated["param_version"][keep]
    steps = evaluated["env_steps"][keep]
    series = {n: learned[n][~np.isnan(learned[n])] for n in names}
    rows = []
    for i in fall_indices(values, drop, window):
        start = versions[i - 1]
        span = (learned["param_version"] > start) & (learned["param_version"] <= versions[i])
        if not span.any():
            continue  # the learner logged no row between the evaluations
        peaks = {n: float(np.nanmax(learned[n][span])) for n in names}
        rows.append(
            dict(
                run_dir=run_dir,
                env_steps=int(steps[i]),
                value=round(float(values[i]), 3),
                before=round(float(values[i - window : i].mean()), 3),
                versions=[int(start), int(versions[i])],
                peaks={n: round(v, 5) for n, v in peaks.items()},
                ranks={n: round(rank(series[n], peaks[n]), 3) for n in names},
                chance={n: round(chance_rank(series[n], int(span.sum())), 3) for n in names},
            )
        )
    summary = dict(run_dir=run_dir, evaluations=len(values), falls=len(rows))
    for key in ("ranks", "chance"):
        summary[key] = {n: round(float(np.mean([r[key][n] for r in rows])), 3) for n in names}
    return rows, summary if rows else dict(summary, ranks={}, chance={})


def _flags():
    values = flags.FlagValues()
    flags.DEFINE_list("run_dirs", [], "Distributed run directories.", flag_values=values)
    flags.DEFINE_float(
        "drop", 0.5, "A fall: below this share of the evaluations before.", flag_values=values
    )
    flags.DEFINE_integer("window", 4, "Evaluations a fall is measured against.", flag_values=values)
    flags.DEFINE_list(
        "metrics",
        ["approx_kl", "clip_fraction", "grad_norm", "value_loss"],
        "The learner's metrics (logs/learner.csv columns) to rank.",
        flag_values=values,
    )
    flags.DEFINE_string("column", "mean_return", "The evaluator's figure.", flag_values=values)
    flags.DEFINE_string("out", None, "Append the rows to this JSON-lines file.", flag_values=values)
    return values


def main(argv=None) -> list:
    args = _flags()
    try:
        args([sys.argv[0], *(sys.argv[1:] if argv is None else argv)])
    except flags.Error as err:
        cli.fail(f"bad flag: {err}")
    if not args.run_dirs:
        cli.fail("--run_dirs: give at least one run directory")
    if not 0 < args.drop < 1 or args.window < 1:
        cli.fail(f"--drop={args.drop}, --window={args.window}: need 0 < drop < 1, window >= 1")
    summaries = []
    for run_dir in args.run_dirs:
        try:
            rows, summary = analyse(run_dir, args.drop, args.window, args.metrics, args.column)
        except (OSError, ValueError) as err:
            cli.fail(str(err))
        for row in rows:
            emit_row(row, args.out)
        emit_row(summary, args.out)
        summaries.append(summary)
    return summaries


if __name__ == "__main__":
    main()
