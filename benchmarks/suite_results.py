"""Runs a standard suite (`benchmarks/suites.py`) on seeds at its budget with every
target off, and writes one row per seed: the LAST policy's return when the budget
ends, nothing stopped early (docs/results.md, "How the figures are measured").

Single process (`--mode=single`: `distrl.local.train` in this process, as
`python -m distrl.local` runs it) or distributed (`--mode=distributed`:
`launch/train.py`, local_mp, as the preset sets its actors; one run at a time, its
directory under `--run_root`). Per seed it appends to `<out>/at_budget.csv`: the last
policy's mean return over its final evaluation (`evaluator.confirm_envs` episodes)
with the 95% interval, its exact share of the optimum on a tabular env, the env steps
at which a routine evaluation first reached the preset's target (its mean, or exact
share: not a confirmed stop), the best routine evaluation (beside, never instead of,
the last), seconds, load, commit, the command that reproduces the row and the
platform; and each evaluation's env steps and return to `<out>/curves/<study>.csv`.

    .venv/bin/python -m benchmarks.suite_results --suites=ppo_breakout \
        --seeds=51,52,53,54,55 --mode=distributed --study=minatar-10m \
        [--env_steps=0: the suite's budget] [--out=benchmarks/results] \
        [--run_root=runs/suites] [--config.<section>.<field>=<value>]

Rows go into benchmarks/results/ only from a clean working tree (the row's commit
must be the code that ran); another `--out` takes any tree and says so in the note.
"""

import datetime
import math
import os
import platform
import shlex
import sys

from absl import flags

from benchmarks import suites
from benchmarks.common import ROOT, append_csv, device_fields, head_commit, load_config
from distrl import cli, local, metrics
from distrl import config as config_lib
from distrl import experiment as experiment_lib
from distrl.analysis import compare
from distrl.records import results, rundir

ROWS_FILE = "at_budget.csv"
CURVES_DIR = "curves"
COLUMNS = (
    "study", "date", "suite", "config", "env", "mode", "seed", "budget", "env_steps",
    "policy", "final_return", "final_low", "final_high", "final_episodes", "final_exact",
    "target", "env_steps_to_target", "best_return", "best_env_steps", "evaluations",
    "seconds", "load", "commit", "commit_source", "command", "platform", "note",
)  # fmt: skip
CURVE_COLUMNS = ("study", "suite", "mode", "seed", "env_steps", "seconds", "mean_return")
CURVE_COLUMNS += ("exact_ratio", "commit")


_RATIO = {False: "ratio", True: "return_ratio"}  # the exact answer's share, by optimal_measure


def preset_target(config, exact: bool):
    """(column, threshold) a routine evaluation is compared with for "env steps to the
    target", read before the targets are turned off; None where the preset has none."""
    ev = config.evaluator
    if exact:
        return ("exact_ratio", ev.target_of_optimal or 1.0)
    return ("mean_return", ev.target_return) if ev.target_return else None


def describe_target(target) -> str:
    if target is None:
        return ""
    column, threshold = target
    return f"{threshold:.0%} of the optimum" if column == "exact_ratio" else f"return {threshold:g}"


def first_reached(curve, target):
    """Env steps of the first curve point at or above the target (None: never, or none)."""
    if target is None:
        return None
    column, threshold = target
    hits = [p["env_steps"] for p in curve if p[column] == p[column] and p[column] >= threshold]
    return hits[0] if hits else None


def prepare(suite, seed: int, budget: int, overrides: dict):
    """(config, target): the suite's config with its and the command's overrides, the
    seed, and the protocol's settings (`suites.target_off`) applied last."""
    config = load_config(suite.config, dict(suite.overrides))
    cli.apply_overrides(config, overrides)
    config.seed = seed
    target = preset_target(config, suite.exact)
    suites.target_off(config, budget)
    experiment_lib.make(config)
    return config, target


def run_single(config) -> dict:
    """One seed in this process: `distrl.local.train`, each jitted call ending on a
    routine evaluation (the curve), the final evaluation the last policy's."""
    every = local.Settings.of(experiment_lib.make(config)).eval_every
    config.local.update(dict(iterations_per_call=every, eval_every=every))
    result = local.train(config)
    exact = result.exact or {}
    on_return = config.evaluator.optimal_measure == "return"  # the history holds success only
    optimal = math.nan if on_return else exact.get("optimal_success") or math.nan
    success_at = {steps: success for steps, _, success in result.history}
    curve = [
        dict(
            env_steps=s, seconds=t, mean_return=r, exact_ratio=success_at.get(s, math.nan) / optimal
        )
        for s, t, r in result.evaluations
    ]
    final = (result.mean_return, result.return_low, result.return_high, result.eval_episodes)
    return dict(
        curve=curve,
        final=final,
        exact=exact.get(_RATIO[on_return]),
        env_steps=result.env_steps,
        seconds=result.wall_time,
    )


def run_distributed(config, name: str, run_dir: str, timeout_s: float) -> dict:
    """One seed with launch/train.py (local_mp) into `run_dir`, read back from its
    evaluator log and result.json."""
    rundir.check_fresh(run_dir)
    config.run_dir = run_dir
    code = compare.run_one(
        compare.RunSpec(name, config.seed, run_dir, config), "local_mp", timeout_s
    )
    result = results.read(run_dir) or {}
    if code != 0 or "evaluation" not in result:
        raise RuntimeError(f"{run_dir}: launch/train.py exit {code}, see {run_dir}/train.log")
    data = metrics.read_csv(metrics.csv_path(run_dir, "evaluator"))
    on_return = config.evaluator.optimal_measure == "return"
    measure = "return" if on_return else "success"
    optimal = data.get(f"optimal_{measure}", [math.nan] * len(data["env_steps"]))
    exact = data.get(f"exact_{measure}", [math.nan] * len(data["env_steps"]))
    curve = [
        dict(env_steps=int(s), seconds=float(t), mean_return=float(r), exact_ratio=float(e / o))
        for s, t, r, e, o in zip(
            data["env_steps"], data["elapsed"], data["mean_return"], exact, optimal
        )
    ]
    ev = result["evaluation"]
    return dict(
        curve=curve,
        final=(ev["mean_return"], ev["return_low"], ev["return_high"], ev["episodes"]),
        exact=(result.get("exact") or {}).get(_RATIO[on_return]),
        env_steps=int(result.get("counts", {}).get("env_steps", curve[-1]["env_steps"])),
        seconds=result.get("wall_seconds", math.nan),
    )


def _number(x, digits: int = 2) -> str:
    return "" if x is None or x != x else f"{x:.{digits}f}"


def make_row(suite, config, mode: str, measured: dict, target, context: dict) -> dict:
    """The at_budget.csv row of one seed (see COLUMNS)."""
    curve = measured["curve"]
    mean, low, high, episodes = measured["final"]
    best = max(curve, key=lambda p: p["mean_return"], default=None)
    reached = first_reached(curve, target)
    return dict(
        context,
        suite=suite.name,
        config=suite.config,
        env=suite.env,
        mode=mode,
        seed=config.seed,
        budget=config.budget.env_steps,
        env_steps=measured["env_steps"],
        policy="sampled" if config.evaluator.sampled else "greedy",
        final_return=_number(mean),
        final_low=_number(low),
        final_high=_number(high),
        final_episodes=int(episodes),
        final_exact=_number(measured["exact"], 4),
        target=describe_target(target),
        env_steps_to_target="" if reached is None else reached,
        best_return=_number(best and best["mean_return"]),
        best_env_steps="" if best is None else best["env_steps"],
        evaluations=len(curve),
        seconds=_number(measured["seconds"], 1),
    )


def _curve_point(point: dict) -> dict:
    return dict(
        env_steps=int(point["env_steps"]),
        seconds=_number(point["seconds"], 1),
        mean_return=_number(point["mean_return"], 4),
        exact_ratio=_number(point["exact_ratio"], 4),
    )


def _flags():
    values = flags.FlagValues()
    flags.DEFINE_list("suites", [], f"Of {', '.join(suites.BY_NAME)}.", flag_values=values)
    flags.DEFINE_list("seeds", ["51", "52", "53", "54", "55"], "Seeds.", flag_values=values)
    cli.require_integers("seeds", values)
    flags.DEFINE_enum("mode", "single", ["single", "distributed"], "How.", flag_values=values)
    flags.DEFINE_integer("env_steps", 0, "Budget (0: the suite's).", flag_values=values)
    flags.DEFINE_string("study", None, "The rows' study name.", flag_values=values)
    flags.DEFINE_string("out", str(ROOT / "benchmarks" / "results"), "Where.", flag_values=values)
    flags.DEFINE_string("run_root", "runs/suites", "Distributed runs.", flag_values=values)
    flags.DEFINE_float("run_timeout", 4 * 3600.0, "Seconds per run.", flag_values=values)
    flags.DEFINE_string("note", "", "A note for every row.", flag_values=values)
    return values


def _chosen(args) -> list:
    unknown = sorted(set(args.suites) - set(suites.BY_NAME))
    if not args.suites or unknown:
        cli.fail(f"bad flag: --suites={','.join(args.suites)}; valid: {', '.join(suites.BY_NAME)}")
    if not args.study:
        cli.fail("bad flag: --study is required (the rows' study name)")
    chosen = [suites.BY_NAME[name] for name in args.suites]
    for suite in chosen if args.mode == "single" else ():
        try:  # the one refusal of one process: a warm-up rollout of an env stepped in Python
            local.Settings.of(experiment_lib.make(load_config(suite.config, dict(suite.overrides))))
        except config_lib.ConfigError as err:
            cli.fail(f"bad flag: --mode=single: {suite.name}: {err}")
    return chosen


def _command(args, suite, seed: int, budget: int, overrides) -> str:
    """The command that measures this one row again."""
    parts = ["python", "-m", "benchmarks.suite_results", f"--suites={suite.name}"]
    parts += [f"--seeds={seed}", f"--mode={args.mode}", f"--env_steps={budget}"]
    parts += [f"--study={args.study}", *overrides.flags()]
    return " ".join(shlex.quote(p) for p in parts)


def _context(args, commit: str, dirty: bool, load: tuple) -> dict:
    on = device_fields()  # this process's JAX backend: the trainer's or the learner's
    note = "; ".join(filter(None, [args.note, "uncommitted changes in the tree" * dirty]))
    return dict(
        study=args.study,
        date=datetime.date.today().isoformat(),
        load=f"{load[0]:.1f}-{load[1]:.1f}",
        commit=commit,
        commit_source="recorded",
        platform=f"{platform.machine()}, {os.cpu_count()} cores, jax {on['platform']} "
        f"({on['device']})",
        note=note,
    )


def run_seed(args, suite, seed: int, overrides, commit: tuple) -> tuple[dict, list]:
    """Runs one seed of a suite; (its row, its curve rows)."""
    budget = args.env_steps or suite.budget
    config, target = prepare(suite, seed, budget, overrides.of(suite.config))
    before = os.getloadavg()[0]
    if args.mode == "single":
        measured = run_single(config)
    else:
        run_dir = os.path.abspath(
            os.path.join(args.run_root, args.study, suite.name, f"seed{seed}")
        )
        measured = run_distributed(config, suite.config, run_dir, args.run_timeout)
    context = _context(args, *commit, (before, os.getloadavg()[0]))
    context["command"] = _command(args, suite, seed, budget, overrides)
    row = make_row(suite, config, args.mode, measured, target, context)
    keys = dict(study=args.study, suite=suite.name, mode=args.mode, seed=seed, commit=commit[0])
    curve = [dict(keys, **_curve_point(p)) for p in measured["curve"]]
    return row, curve


def main(argv=None) -> list:
    args = _flags()
    argv = [sys.argv[0], *(sys.argv[1:] if argv is None else argv)]
    overrides = cli.parse_several(
        args, argv, lambda a: {s.config: load_config(s.config) for s in _chosen(a)}, usage=__doc__
    )
    commit = head_commit()
    if commit[1] and os.path.abspath(args.out) == str(ROOT / "benchmarks" / "results"):
        cli.fail("uncommitted changes: rows in benchmarks/results/ must name the code that ran")
    rows = []
    for suite in _chosen(args):
        for seed in (int(s) for s in args.seeds):
            row, curve = run_seed(args, suite, seed, overrides, commit)
            append_csv(os.path.join(args.out, ROWS_FILE), COLUMNS, [row])
            append_csv(
                os.path.join(args.out, CURVES_DIR, f"{args.study}.csv"), CURVE_COLUMNS, curve
            )
            print(
                ", ".join(f"{k}={row[k]}" for k in ("suite", "seed", "final_return", "env_steps"))
            )
            rows.append(row)
    return rows


if __name__ == "__main__":
    main()
