"""Stage 8, analysis: the comparison's tables as markdown (and its per-run CSV).

`aggregate` reduces the per-run rows of `distrl.analysis.compare.summarize` to one row per
config (mean and min-max over seeds); `markdown` writes the report a researcher
can paste into an appendix: the setup, the summary table, the definitions, the
curves figure and a per-run table.
"""

import csv
import math

import numpy as np

from distrl import metrics

SUMMARY_COLUMNS = (
    ("exact_success", "final exact success", "rate3"),
    ("exact_ratio", "of optimal", "percent"),
    ("steps_to_95", "env steps to 95%", "count"),
    ("seconds_to_95", "wall s to 95%", "seconds"),
    ("steps_to_98", "env steps to 98%", "count"),
    ("seconds_to_98", "wall s to 98%", "seconds"),
    ("env_steps", "env steps", "count"),
    ("samples_per_insert", "samples/insert", "ratio"),
    ("data_age_mean", "data age mean", "ratio"),
    ("data_age_max", "data age max", "int"),
    ("env_steps_per_s", "env steps/s", "count"),
    ("updates_per_s", "updates/s", "count"),
)
RUN_COLUMNS = (
    ("config", "config", None),
    ("seed", "seed", None),
    ("stop_reason", "stopped by", None),
    ("startup_s", "startup s", "seconds"),
    ("exact_success", "exact success", "rate3"),
    ("exact_ratio", "of optimal", "percent"),
    ("steps_to_95", "steps to 95%", "count"),
    ("seconds_to_95", "s to 95%", "seconds"),
    ("steps_to_98", "steps to 98%", "count"),
    ("seconds_to_98", "s to 98%", "seconds"),
    ("final_success", "final success", "rate"),
    ("env_steps", "env steps", "count"),
    ("samples_per_insert", "samples/insert", "ratio"),
    ("data_age_mean", "age mean", "ratio"),
    ("data_age_max", "age max", "int"),
    ("env_steps_per_s", "env steps/s", "count"),
    ("updates_per_s", "updates/s", "count"),
)
REACHED = (("steps_to_95", "reached 95%"), ("steps_to_98", "reached 98%"))
# An env without a success signal (CartPole, MinAtar): the greedy mean return instead.
_SHARED = SUMMARY_COLUMNS[6:]  # env steps, samples per insert, data age, throughput
RETURN_SUMMARY_COLUMNS = (
    ("result_return", "final return", "ratio"),
    ("steps_to_target", "env steps to target", "count"),
    ("seconds_to_target", "wall s to target", "seconds"),
    *_SHARED,
)
RETURN_RUN_COLUMNS = (
    *RUN_COLUMNS[:4],
    ("return_interval", "final return [95%]", None),
    ("steps_to_target", "steps to target", "count"),
    ("seconds_to_target", "s to target", "seconds"),
    *RUN_COLUMNS[11:],
)
RETURN_REACHED = (("steps_to_target", "reached target"),)


DEFINITIONS = (
    "Exact success: the final policy's greedy success probability within the time "
    "limit, computed exactly (`distrl/envs/exact.py`); of optimal: its share of the "
    "exact optimum's (the best stationary policy for the agent's discount). The final "
    "policy is the run's result: the confirmed one at the target, or with "
    "`evaluator.keep_best` the best confirmed one when a budget ended the run. "
    "Env steps and wall time to 95% / 98%: the first evaluation whose greedy policy's "
    "exact success reached that share of the optimum; they count only the seeds that "
    "reached it. "
    "Wall time is measured from the last evaluation before the first env step "
    "was counted (process start-up and compilation excluded; see `startup s` "
    "below), at the resolution of one evaluation period. Throughput is the run's "
    "env steps (learner updates) over that training time. Samples/insert is "
    "Reverb's completed samples over completed inserts, in items (a replay item "
    "is k time steps of B envs, k = replay.item_steps, a queue item one T x B "
    "chunk). Data age: learner "
    "updates between the params an item was acted with and the update that learned "
    "from it (mean over the items learned, and max)."
)


RETURN_DEFINITIONS = (
    "Final return: the greedy mean episodic return of the run's result policy (the "
    "confirmed one at the target, or with `evaluator.keep_best` the best confirmed one "
    "when a budget ended the run), over the result's evaluation episodes, with its 95% "
    "interval per run; the summary gives its mean [min–max] over seeds. Env steps and "
    "wall time to target: the first evaluation whose return interval's lower bound "
    "reached the target return; they count only the seeds that reached it. "
    + DEFINITIONS[DEFINITIONS.index("Wall time is measured") :]
)


def returns_only(rows) -> bool:
    """Whether the runs' env has no success signal (their rows say so), so the
    report compares mean returns instead of success rates."""
    known = [r["has_success"] for r in rows if "has_success" in r]
    return bool(known) and not any(known)


def _interval(row) -> str:
    """'+12.30 [+11.90, +12.70]' of the result's mean return, or '—'."""
    mean = row.get("result_return", math.nan)
    if mean is None or math.isnan(mean):
        return "—"
    return f"{mean:+.2f} [{row['result_return_low']:+.2f}, {row['result_return_high']:+.2f}]"


def fmt(value, kind) -> str:
    """One number the way the tables print it ('—' for a missing one)."""
    if kind is None:
        return str(value)
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if kind == "count":
        return metrics.human(value)
    if kind == "seconds":
        return f"{value:.1f}"
    if kind == "rate3":
        return f"{value:.3f}"
    if kind == "percent":
        return f"{100 * value:.1f}%"
    if kind == "int":
        return f"{value:.0f}"
    return f"{value:.2f}"


def spread(values, kind) -> str:
    """'mean [min–max]' of the finite values, or '—'."""
    finite = [v for v in values if v is not None and not math.isnan(v)]
    if not finite:
        return "—"
    if len(finite) == 1:
        return fmt(finite[0], kind)
    return f"{fmt(np.mean(finite), kind)} [{fmt(min(finite), kind)}–{fmt(max(finite), kind)}]"


def aggregate(rows, pipelines: dict) -> list:
    """One summary row (formatted strings) per config, in first-seen order: success
    columns, or return columns for an env without a success signal (`returns_only`)."""
    returns = returns_only(rows)
    reached_columns = RETURN_REACHED if returns else REACHED
    columns = RETURN_SUMMARY_COLUMNS if returns else SUMMARY_COLUMNS
    out = []
    for name in dict.fromkeys(r["config"] for r in rows):
        runs = [r for r in rows if r["config"] == name]
        confirmed = sum(1 for r in runs if r.get("stop_reason") == "target_reached")
        row = {
            "config": name,
            "pipeline": pipelines.get(name, ""),
            "confirmed target": f"{confirmed}/{len(runs)}",
        }
        for key, label in reached_columns:
            reached = sum(1 for r in runs if not math.isnan(r.get(key, math.nan)))
            row[label] = f"{reached}/{len(runs)}"
        for key, label, kind in columns:
            row[label] = spread([r.get(key, math.nan) for r in runs], kind)
        out.append(row)
    return out


def table(rows, columns) -> str:
    """A markdown table of dict rows over `columns` (their keys, in order)."""
    lines = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    lines += ["| " + " | ".join(str(r.get(c, "")) for c in columns) + " |" for r in rows]
    return "\n".join(lines)


def markdown(title: str, setup: list, rows, pipelines: dict, figures: list) -> str:
    """The whole report: setup bullets, summary table, definitions, figures, runs."""
    summary = aggregate(rows, pipelines)
    returns = returns_only(rows)
    columns = RETURN_RUN_COLUMNS if returns else RUN_COLUMNS
    runs = [
        {
            label: _interval(r) if key == "return_interval" else fmt(r.get(key, math.nan), kind)
            for key, label, kind in columns
        }
        for r in rows
    ]
    parts = [
        f"# {title}",
        "",
        *[f"- {line}" for line in setup],
        "",
        "## Summary (mean [min–max] over seeds)",
        "",
        table(summary, list(summary[0]) if summary else []),
        "",
        RETURN_DEFINITIONS if returns else DEFINITIONS,
        "",
    ]
    parts += [f"![{caption}]({path})\n\n*{caption}*\n" for path, caption in figures]
    parts += ["## Runs", "", table(runs, [label for _, label, _ in columns]), ""]
    return "\n".join(parts)


def write_csv(rows, path: str) -> None:
    """Every run's raw numbers, one row each."""
    keys = list(dict.fromkeys(k for r in rows for k in r))
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=keys)
        writer.writeheader()
        writer.writerows(rows)
