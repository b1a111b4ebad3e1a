"""Stage 8, analysis: comparing configs (e.g. replay vs on-policy) over seeds.

`plan` turns config files plus shared settings (map, actors, budget, seeds) into
one fully resolved, validated config per run, before anything runs; `run_one`
trains one of them with `launch/train.py` in its own process (sequentially: a
small machine has no cores to spare); `summarize` reads a finished run directory;
`aggregate` and `markdown` turn the runs into the report's tables.

Definitions used in the report (also printed under its table):
- time origin: the last evaluation at which no env step had been counted yet, so
  process start-up and compilation are not charged to an algorithm (`startup_s`);
- steps / time to target: the first evaluation whose greedy success rate reached
  the target (resolution: one evaluation period);
- throughput: env steps and learner updates divided by training time;
- samples per insert: Reverb's completed samples / completed inserts over the run
  (items: a replay item holds one time step of B envs, a queue item a T x B chunk).
"""

import dataclasses
import json
import os
import subprocess
import sys

import numpy as np

from distrl import cli, metrics, rundir
from distrl import config as config_lib

ROOT = os.path.dirname(cli.CONFIGS_DIR)  # the checkout


@dataclasses.dataclass
class RunSpec:
    """One planned run: which config, which seed, where, and its resolved config."""

    name: str
    seed: int
    run_dir: str
    config: object


def parse_overrides(items: list[str]) -> dict:
    """['actor.num_envs=32', 'env.slippery=True'] -> {'actor.num_envs': 32, ...}."""
    return dict(cli.parse_override(item) for item in items)


def plan(names, seeds, out_dir: str, shared: dict, overrides: dict) -> list[RunSpec]:
    """Every run's resolved config, all validated before any run starts.

    `shared`: dotted keys applied to every config (map, actors, budget, target),
    then `overrides` (--set). Raises ConfigError naming every bad run at once.
    """
    specs, errors = [], []
    for name in names:
        for seed in seeds:
            run_dir = os.path.abspath(os.path.join(out_dir, os.path.basename(name), f"seed{seed}"))
            try:
                config = cli.load_file(name)
                cli.apply_overrides(config, dict(shared, seed=seed, run_dir=run_dir))
                cli.apply_overrides(config, overrides)
                config_lib.validate(config)
                rundir.check_fresh(run_dir)
            except (config_lib.ConfigError, KeyError, TypeError, AttributeError) as err:
                errors.append(f"{name} seed {seed}: {err}")
                continue
            specs.append(RunSpec(os.path.basename(name), seed, run_dir, config))
    if errors:
        raise config_lib.ConfigError("\n  ".join(["some runs cannot start:"] + errors))
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
            return subprocess.run(
                command,
                cwd=ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
                timeout=timeout_s,
                check=False,
            ).returncode
        except subprocess.TimeoutExpired:
            log.write(f"\ncompare: killed after {timeout_s} s\n")
            return 124


def training_origin(data) -> float:
    """Elapsed seconds of the last evaluation before any env step was counted."""
    idle = np.flatnonzero(data["env_steps"] <= 0)
    return float(data["elapsed"][idle[-1]]) if len(idle) else 0.0


def summarize(spec: RunSpec, target: float, returncode: int) -> dict:
    """One run's numbers for the report (NaN where the run has none)."""
    data = metrics.read_csv(metrics.csv_path(spec.run_dir, "evaluator"))
    row = dict(config=spec.name, seed=spec.seed, returncode=returncode, run_dir=spec.run_dir)
    if not data or not len(data["step"]):
        return row
    origin = training_origin(data)
    seconds = max(float(data["elapsed"][-1]) - origin, 1e-9)
    reached = np.flatnonzero(data["success_rate"] >= target)
    result_path = os.path.join(spec.run_dir, rundir.RESULT_FILE)
    result = {}
    if os.path.exists(result_path):
        with open(result_path) as f:
            result = json.load(f)
    row.update(
        startup_s=origin,
        steps_to_target=float(data["env_steps"][reached[0]]) if len(reached) else np.nan,
        seconds_to_target=float(data["elapsed"][reached[0]]) - origin if len(reached) else np.nan,
        final_success=float(data["success_rate"][-1]),
        final_return=float(data["mean_return"][-1]),
        env_steps=float(data["env_steps"][-1]),
        env_steps_per_s=float(data["env_steps"][-1]) / seconds,
        updates_per_s=float(data["learner_steps"][-1]) / seconds,
        samples_per_insert=result.get("replay", {}).get("samples_per_insert", np.nan),
        stop_reason=result.get("stop_reason", "no result"),
    )
    return row


def curves(specs: list[RunSpec]) -> dict:
    """{config: [evaluator columns + 'train_seconds', per seed]} for plots.plot_comparison."""
    out = {}
    for spec in specs:
        data = metrics.read_csv(metrics.csv_path(spec.run_dir, "evaluator"))
        if not data or len(data["step"]) < 2:
            continue
        data["train_seconds"] = np.maximum(data["elapsed"] - training_origin(data), 0.0)
        out.setdefault(spec.name, []).append(data)
    return out
