"""Stage 8, analysis: the comparison's tables as markdown (and its per-run CSV).

`aggregate` reduces the per-run rows of `distrl.analysis.compare.summarize` to one row per
config (mean and min-max over seeds); `markdown` writes the report a researcher
can paste into an appendix: the setup, the summary table, the definitions, the
curves figure and a per-run table.
"""

import csv
import math

import numpy as np

from distrl.program import progress

SUMMARY_COLUMNS = (
    ("steps_to_target", "env steps to target", "count"),
    ("seconds_to_target", "wall s to target", "seconds"),
    ("final_success", "final success", "rate"),
    ("env_steps_per_s", "env steps/s", "count"),
    ("updates_per_s", "updates/s", "count"),
    ("samples_per_insert", "samples/insert", "ratio"),
)
RUN_COLUMNS = (
    ("config", "config", None),
    ("seed", "seed", None),
    ("stop_reason", "stopped by", None),
    ("startup_s", "startup s", "seconds"),
    ("steps_to_target", "steps to target", "count"),
    ("seconds_to_target", "s to target", "seconds"),
    ("final_success", "final success", "rate"),
    ("final_return", "final return", "ratio"),
    ("env_steps", "env steps", "count"),
    ("env_steps_per_s", "env steps/s", "count"),
    ("updates_per_s", "updates/s", "count"),
    ("samples_per_insert", "samples/insert", "ratio"),
)


DEFINITIONS = (
    "Env steps and wall time to target count only the seeds that reached it. "
    "Wall time is measured from the last evaluation before the first env step "
    "was counted (process start-up and compilation excluded; see `startup s` "
    "below), at the resolution of one evaluation period. Throughput is the run's "
    "env steps (learner updates) over that training time. Samples/insert is "
    "Reverb's completed samples over completed inserts, in items (a replay item "
    "is one time step of B envs, a queue item one T x B chunk)."
)


def fmt(value, kind) -> str:
    """One number the way the tables print it ('—' for a missing one)."""
    if kind is None:
        return str(value)
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if kind == "count":
        return progress.human(value)
    if kind == "seconds":
        return f"{value:.1f}"
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
    """One summary row (formatted strings) per config, in first-seen order."""
    out = []
    for name in dict.fromkeys(r["config"] for r in rows):
        runs = [r for r in rows if r["config"] == name]
        reached = sum(1 for r in runs if not math.isnan(r.get("steps_to_target", math.nan)))
        row = {
            "config": name,
            "pipeline": pipelines.get(name, ""),
            "reached target": f"{reached}/{len(runs)}",
        }
        for key, label, kind in SUMMARY_COLUMNS:
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
    runs = [
        {label: fmt(r.get(key, math.nan), kind) for key, label, kind in RUN_COLUMNS} for r in rows
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
        DEFINITIONS,
        "",
    ]
    parts += [f"![{caption}]({path})\n\n*{caption}*\n" for path, caption in figures]
    parts += ["## Runs", "", table(runs, [label for _, label, _ in RUN_COLUMNS]), ""]
    return "\n".join(parts)


def write_csv(rows, path: str) -> None:
    """Every run's raw numbers, one row each."""
    keys = list(dict.fromkeys(k for r in rows for k in r))
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=keys)
        writer.writeheader()
        writer.writerows(rows)
