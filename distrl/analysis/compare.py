"""Stage 8, analysis: comparing configs (e.g. replay vs on-policy) over seeds.

`plan` turns config files plus shared settings (map, actors, budget, seeds) into
one fully resolved, validated config per run, before anything runs; `run_one`
trains one of them with `launch/train.py` in its own process (sequentially: a
small machine has no cores to spare); `summarize` reads a finished run directory;
`aggregate` and `markdown` (`compare_report`) turn the runs into the report's tables.
What each figure means is `compare_report.DEFINITIONS`, printed under the table; time
counts from the last evaluation before any env step (`startup_s`), so process
start-up and compilation are not charged to an algorithm.
"""

import csv
import dataclasses
import os
import subprocess
import sys

import numpy as np

from distrl import cli, metrics
from distrl import config as config_lib
from distrl import experiment as experiment_lib
from distrl.records import results, rundir

ROOT = os.path.dirname(cli.CONFIGS_DIR)  # the checkout


@dataclasses.dataclass
class RunSpec:
    """One planned run: which config, which seed, where, and its resolved config."""

    name: str
    seed: int
    run_dir: str
    config: object

    @property
    def pipeline(self):
        """How the run's data travels (`distrl.pipelines`), for the report."""
        return experiment_lib.Experiment(self.config).pipeline


def loadable(names) -> dict:
    """{name: config} of the config files that load (`plan` names the others), keyed by
    the name a run directory and a `--<name>.` override flag use."""
    configs = {}
    for name in names:
        try:
            configs[os.path.basename(name)] = cli.load_file(name)
        except Exception:  # noqa: BLE001, S112 - a config file may raise anything; plan says
            continue
    return configs


def plan(names, seeds, out_dir: str, shared: dict, overrides=None) -> list[RunSpec]:
    """Every run's resolved config, all validated before any run starts.

    `shared`: dotted keys applied to every config (map, actors, budget, target),
    then `overrides` (a `cli.Overrides`: the command's --config. and --<name>.
    flags). Raises ConfigError naming every bad run at once, in one line.
    """
    overrides = overrides or cli.Overrides({}, {})
    specs, errors = [], []
    for name in names:
        for seed in seeds:
            run_dir = os.path.abspath(os.path.join(out_dir, os.path.basename(name), f"seed{seed}"))
            try:
                config = cli.load_file(name)
                cli.apply_overrides(config, dict(shared, seed=seed, run_dir=run_dir))
                cli.apply_overrides(config, overrides.of(os.path.basename(name)))
                experiment_lib.make(config)
                rundir.check_fresh(run_dir)
            except (config_lib.ConfigError, KeyError, TypeError, AttributeError) as err:
                errors.append(f"{name} seed {seed}: {err}")
                continue
            specs.append(RunSpec(os.path.basename(name), seed, run_dir, config))
    if errors:
        raise config_lib.ConfigError("some runs cannot start: " + "; ".join(errors))
    return specs


def run_one(spec: RunSpec, launch_type: str, timeout_s: float | None) -> int:
    """Trains one planned run with launch/train.py; returns its exit status.

    The resolved config is written to the run directory first and handed over
    with configs/from_json.py, so the run trains exactly what was validated. Its
    terminal output goes to <run_dir>/train.log.
    """
    rundir.write_config(spec.config, spec.run_dir)
    command = [
        sys.executable,
        os.path.join(ROOT, "launch", "train.py"),
        f"--config={os.path.join(ROOT, 'configs', 'from_json.py')}:{spec.run_dir}",
        f"--lp_launch_type={launch_type}",
    ]
    with open(os.path.join(spec.run_dir, "train.log"), "w") as log:
        try:
            code = subprocess.run(
                command,
                cwd=ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
                timeout=timeout_s,
                check=False,
            ).returncode
        except subprocess.TimeoutExpired:
            log.write(f"\ncompare: killed after {timeout_s} s\n")
            code = 124
        log.write(f"\n{_EXIT_LINE}{code}\n")  # what `reload` reads back
    return code


_EXIT_LINE = "compare: exit "


def reload(names, seeds, out_dir: str) -> list[tuple[RunSpec, int | None]]:
    """The finished runs of an earlier comparison into out_dir, as (spec, exit status),
    with each run's saved config; runs without a config.json are left out. The exit
    status comes from train.log, else from out_dir/runs.csv, else None."""
    previous = {}
    csv_path = os.path.join(out_dir, "runs.csv")
    if os.path.exists(csv_path):
        with open(csv_path, newline="") as f:
            previous = {
                (r["config"], r["seed"]): int(r["returncode"])
                for r in csv.DictReader(f)
                if r.get("returncode", "").lstrip("-").isdigit()  # '' where unknown
            }
    out = []
    for name in names:
        for seed in seeds:
            name = os.path.basename(name)
            run_dir = os.path.abspath(os.path.join(out_dir, name, f"seed{seed}"))
            if not os.path.exists(os.path.join(run_dir, rundir.CONFIG_FILE)):
                continue
            code = _logged_exit(os.path.join(run_dir, "train.log"))
            code = previous.get((name, str(seed))) if code is None else code
            out.append((RunSpec(name, seed, run_dir, rundir.load_config(run_dir)), code))
    return out


def _logged_exit(path: str) -> int | None:
    if not os.path.exists(path):
        return None
    with open(path, errors="replace") as f:
        lines = [ln for ln in f.read().splitlines() if ln.startswith(_EXIT_LINE)]
    return int(lines[-1][len(_EXIT_LINE) :]) if lines else None


def training_origin(data) -> float:
    """Elapsed seconds of the last evaluation before any env step was counted."""
    idle = np.flatnonzero(data["env_steps"] <= 0)
    return float(data["elapsed"][idle[-1]]) if len(idle) else 0.0


FRACTIONS = (0.95, 0.98)  # shares of the exact optimum whose first reaching is reported


def first_reach(data, fraction: float, origin: float):
    """(env steps, training seconds) of the first evaluation whose exact success is
    >= fraction x the optimum's, or (NaN, NaN); data: the evaluator's columns."""
    if "exact_success" not in data:
        return np.nan, np.nan
    ok = np.flatnonzero(data["exact_success"] >= fraction * data["optimal_success"])
    if not len(ok):
        return np.nan, np.nan
    return float(data["env_steps"][ok[0]]), float(data["elapsed"][ok[0]]) - origin


def result_fields(result: dict) -> dict:
    """The report's numbers from result.json: the final policy's exact success and its
    ratio to the optimum, its greedy mean return with the 95% interval (the result's
    evaluation), samples per insert, data age (NaN where absent)."""
    exact = result.get("exact") or {}
    data = result.get("data") or {}
    evaluation = result.get("evaluation") or {}
    return dict(
        exact_success=exact.get("success", np.nan),
        optimal_success=exact.get("optimal_success", np.nan),
        exact_ratio=exact.get("ratio", np.nan),
        result_return=evaluation.get("mean_return", np.nan),
        result_return_low=evaluation.get("return_low", np.nan),
        result_return_high=evaluation.get("return_high", np.nan),
        samples_per_insert=(result.get("replay") or {}).get("samples_per_insert", np.nan),
        data_age_mean=data.get("data_age_mean", np.nan),
        data_age_max=data.get("data_age_max", np.nan),
        stop_reason=result.get("stop_reason", "no result"),
    )


def summarize(spec: RunSpec, target: float, returncode: int, target_return: float = 0.0) -> dict:
    """One run's numbers for the report (NaN where the run has none).

    On an env with a success signal (its evaluator rows have `success_rate`) the
    target is the success rate `target`; on one without, the greedy mean return's
    lower bound reaching `target_return` (0: none) counts instead.
    """
    data = metrics.read_csv(metrics.csv_path(spec.run_dir, "evaluator"))
    row = dict(config=spec.name, seed=spec.seed, returncode=returncode, run_dir=spec.run_dir)
    if not data or not len(data["step"]):
        return row
    origin = training_origin(data)
    seconds = max(float(data["elapsed"][-1]) - origin, 1e-9)
    has_success = "success_rate" in data
    if has_success:
        reached = np.flatnonzero(data["success_rate"] >= target)
    elif target_return:
        reached = np.flatnonzero(data["return_low"] >= target_return)
    else:
        reached = np.array([], int)
    row.update(
        has_success=has_success,
        startup_s=origin,
        steps_to_target=float(data["env_steps"][reached[0]]) if len(reached) else np.nan,
        seconds_to_target=float(data["elapsed"][reached[0]]) - origin if len(reached) else np.nan,
        final_success=float(data["success_rate"][-1]) if has_success else np.nan,
        final_return=float(data["mean_return"][-1]),
        env_steps=float(data["env_steps"][-1]),
        env_steps_per_s=float(data["env_steps"][-1]) / seconds,
        updates_per_s=float(data["learner_steps"][-1]) / seconds,
    )
    for fraction in FRACTIONS:
        pct = round(100 * fraction)
        row[f"steps_to_{pct}"], row[f"seconds_to_{pct}"] = first_reach(data, fraction, origin)
    row.update(result_fields(results.read(spec.run_dir) or {}))
    return row


def curves(specs: list[RunSpec]) -> dict:
    """{config: [evaluator columns + 'train_seconds', per seed]} for plots.plot_comparison."""
    out = {}
    for spec in specs:
        data = metrics.read_csv(metrics.csv_path(spec.run_dir, "evaluator"))
        if not data or len(data["step"]) < 2:
            continue
        data["train_seconds"] = np.maximum(data["elapsed"] - training_origin(data), 0.0)
        if "exact_success" in data:  # the exact success's share of the optimum
            data["exact_ratio"] = data["exact_success"] / data["optimal_success"]
        out.setdefault(spec.name, []).append(data)
    return out
