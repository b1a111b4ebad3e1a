"""A run's outcome, `<run_dir>/result.json`: written by the evaluator when the run
ends, completed by the launcher (restarts, failures), summarized for the terminal.

The summary is one function for both places that print it: the evaluator's node
output and the launcher's final lines.
"""

import os

from distrl import files
from distrl.acting import reporting
from distrl.records import rundir


def path(run_dir: str) -> str:
    return os.path.join(run_dir, rundir.RESULT_FILE)


def write(run_dir: str, result: dict) -> None:
    """Writes result.json atomically (numpy / jax values as plain numbers)."""
    os.makedirs(run_dir, exist_ok=True)
    files.write_json(path(run_dir), result, indent=2)


def read(run_dir: str):
    """The run's result dict, or None when no evaluator wrote one."""
    return files.read_json(path(run_dir)) if os.path.exists(path(run_dir)) else None


def remove(run_dir: str) -> None:
    """Forgets an earlier launch's outcome (a resumed run reports its own)."""
    if os.path.exists(path(run_dir)):
        os.remove(path(run_dir))


def add(run_dir: str, **fields) -> None:
    """Adds `fields` to result.json; without one (no evaluator outcome), writes one
    whose stop_reason is "node_failed" when `fields` holds failures."""
    result = read(run_dir)
    if result is None:
        if not fields.get("failures"):
            return
        result = dict(stop_reason="node_failed")
    result.update(fields)
    write(run_dir, result)


def summary(result, run_dir: str) -> str:
    """The final report: outcome, evaluation, counts, restarts, grids, where files are
    (the params on disk among them)."""
    counts, ev = result.get("counts", {}), result.get("evaluation")
    lines = [
        f"distrl: run ended ({result['stop_reason']}) after {result.get('wall_seconds', 0.0):.1f} s"
    ]
    if ev:
        if "success_low" in ev:  # runs before the interval was recorded lack it
            success = reporting.describe_success(ev) + "  "
        elif "success_rate" in ev:
            success = f"success rate {ev['success_rate']:.3f}  "
        else:  # an env without a success signal
            success = ""
        lines.append(
            f"{success}{reporting.describe_return(ev)}"
            f"  mean length {ev['mean_length']:.1f}"
            f"  ({result.get('evaluated', 'greedy')} evaluation)"
        )
    if result.get("exact"):
        lines.append(reporting.describe_exact(result["exact"]))
    spi = (result.get("replay") or {}).get("samples_per_insert")
    # The counter hears from the learner every 0.5 s; the evaluated params' version
    # is exact, so a run shorter than that report period is not shown as ~0 updates.
    updates = max(counts.get("learner_steps", 0), result.get("param_version") or 0)
    lines.append(
        f"env steps {counts.get('env_steps', 0):,.0f}  learner updates {updates:,.0f}"
        + (f"  samples per insert {spi:.2f}" if spi is not None else "")
    )
    data = result.get("data")
    if data:
        lines.append(
            f"data age mean {data['data_age_mean']:.2f} max {data['data_age_max']:.0f} "
            f"updates; items written {data['items_written']:,.0f}, learned from "
            f"{data['items_learned']:,.0f}"
        )
    for r in result.get("restarts", []):
        lines.append(f"restarted {r['node']} at {r['at_seconds']:.0f} s: {r['cause']}")
    if result.get("grids"):
        lines.append(result["grids"])
    lines += on_disk(result, run_dir)
    plots = (
        f"plots in {os.path.join(run_dir, rundir.PLOTS_DIR)}"
        if rundir.plots_at_the_end()
        else f"plots: python launch/plot.py {run_dir}"
    )
    lines.append(f"run directory {run_dir} ({plots})")
    return "\n".join(lines)


def on_disk(result, run_dir: str) -> list:
    """Lines naming the params on disk: the reported policy's file and the learner's
    last checkpoint (files relative to the run directory), each with its version."""
    saved, last = result.get("policy"), result.get("learner_checkpoint")
    lines = []
    if saved:
        lines.append(
            f"reported policy (version {saved['version']:,}): {saved['file']}; "
            f"evaluate it with launch/evaluate.py --run_dir={run_dir}"
        )
    if last:
        other = saved and last["version"] != saved["version"]
        lines.append(
            f"learner's last checkpoint (version {last['version']:,}"
            f"{', another policy' if other else ''}): {last['file']}"
        )
    return lines
