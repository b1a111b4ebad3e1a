"""Stable learning at a fixed budget: the greedy policy's exact success, or its mean
return, over a run with no target, single-process.

For each config (configs/<name>.py, as a user runs it: its batch, replay and agent)
and seed, `distrl.local.train` runs the whole env-step budget with the targets off
(`evaluator.target_of_optimal = target_success = 0`). After every jitted call of
about `--every` env steps (the distributed evaluator's cadence,
`evaluator.every_env_steps`) the greedy policy's exact success is computed
(`envs.exact`); the row reports, as shares of the exact optimum, the minimum and
mean over the calls in the second half of the budget and the final policy's.

A preset with a return target (`evaluator.target_return`, configs/*_cartpole.py) is
judged by its routine greedy evaluations instead (`evaluator.num_envs` episodes
every `evaluator.every_env_steps`, as the distributed evaluator's): each one's mean
return as a share of that target; the goal is the second half's mean >= 90% of it.

    .venv/bin/python -m benchmarks.stability --configs=dqn_slippery8x8 --seeds=11,12 \
        [--env_steps=4000000] [--every=100000] [--out=runs/stability.jsonl] \
        [--config.agent.learning_rate=3e-4] [--dqn_slippery8x8.agent.n_step=3]

Config overrides as in benchmarks/slippery.py; checked before any run.

A distributed run (`launch/train.py` with the targets off and the same budget) is
measured the same way from its evaluator's log, one row per evaluation:

    .venv/bin/python -m benchmarks.stability --run_dirs=runs/a,runs/b [--env_steps=4000000]
        [--target_return=475]   # a return env's run: its `mean_return` column
"""

import csv
import os
import sys

from absl import flags

from benchmarks import suites
from benchmarks.common import emit_row, load_config, several_overrides
from distrl import cli, local
from distrl import experiment as experiment_lib

GOAL_MIN, GOAL_FINAL = 0.95, 0.98  # the goal: every second-half point, the final
GOAL_RETURN_MEAN = 0.9  # the goal: the second half's mean return, a share of the target


def _shares(history, budget: int, reference: float):
    """(the shares of `reference` past budget / 2, the last point's share);
    history: (steps, s, value)."""
    late = [v / reference for steps, _, v in history if steps > budget / 2]
    return late, history[-1][2] / reference


def _figures(late, final) -> dict:
    return dict(
        min=round(min(late), 4),
        mean=round(sum(late) / len(late), 4),
        final=round(final, 4),
        points=len(late),
    )


def second_half(history, budget: int, optimal: float) -> dict:
    """min / mean exact success (share of `optimal`) over the calls past budget / 2,
    the final call's, and whether they meet the goal. history: (steps, s, success)."""
    late, final = _shares(history, budget, optimal)
    return dict(**_figures(late, final), ok=min(late) >= GOAL_MIN and final >= GOAL_FINAL)


def second_half_return(evaluations, budget: int, target: float) -> dict:
    """The same figures of the mean return (share of `target`) over the evaluations
    past budget / 2; the goal: their mean >= GOAL_RETURN_MEAN. evaluations: (steps,
    s, mean return)."""
    late, final = _shares(evaluations, budget, target)
    figures = _figures(late, final)
    return dict(**figures, ok=figures["mean"] >= GOAL_RETURN_MEAN)


def run_one(name: str, seed: int, env_steps: int, every: int, overrides=None) -> dict:
    config = load_config(name, overrides or {})
    config.seed = seed
    target_return = config.evaluator.target_return  # the preset's, before it is turned off
    suites.target_off(config, env_steps)
    per_iteration = config.num_actors * config.actor.num_envs * config.actor.unroll_length
    if target_return:  # the routine evaluations are the measure: a call ends on each
        calls = local.Settings.of(experiment_lib.make(config)).eval_every
        config.local.update(dict(iterations_per_call=calls, eval_every=calls))
    else:  # the exact success after every call is the measure; no sampled evaluation between
        calls = max(1, round(every / per_iteration))
        config.local.update(dict(iterations_per_call=calls, eval_every=10**9))
    config.local.xla_opt_level = -1
    result = local.train(config)
    row = dict(
        config=name,
        seed=seed,
        overrides={k: v for k, v in (overrides or {}).items()},
        env_steps=result.env_steps,
        updates=result.updates,
        wall=round(result.wall_time, 1),
    )
    if target_return:
        points = result.evaluations
        figures = second_half_return(points, env_steps, target_return)
        row.update(target_return=target_return, **figures)
    else:
        points, optimal = result.history, result.exact["optimal_success"]
        row.update(optimal=round(optimal, 4), **second_half(points, env_steps, optimal))
    return dict(row, curve=[(steps, round(v, 3)) for steps, _, v in points])


def from_run_dir(run_dir: str, env_steps: int, target_return: float = 0.0) -> dict:
    """The same figures from a distributed run's `logs/evaluator.csv` (an evaluation
    every `evaluator.every_env_steps`; the last row is the final policy's): its exact
    success, or with `target_return` > 0 its mean return against that target."""
    column = "mean_return" if target_return else "exact_success"
    with open(os.path.join(run_dir, "logs", "evaluator.csv")) as f:
        rows = [r for r in csv.DictReader(f) if r.get(column)]
    if not rows:
        raise SystemExit(f"{run_dir}: logs/evaluator.csv has no {column} figures")
    history = [(int(float(r["env_steps"])), float(r["elapsed"]), float(r[column])) for r in rows]
    row = dict(run_dir=run_dir, env_steps=history[-1][0])
    if target_return:
        row.update(target_return=target_return)
        row.update(second_half_return(history, env_steps, target_return))
    else:
        optimal = float(rows[-1]["optimal_success"])
        row.update(optimal=round(optimal, 4), **second_half(history, env_steps, optimal))
    return dict(row, curve=[(steps, round(v, 3)) for steps, _, v in history])


def _flags():
    values = flags.FlagValues()
    flags.DEFINE_list("configs", ["dqn_slippery8x8"], "Config names.", flag_values=values)
    flags.DEFINE_list("seeds", ["11", "12", "13", "14", "15"], "Seeds.", flag_values=values)
    cli.require_integers("seeds", values)
    flags.DEFINE_integer("env_steps", 4_000_000, "Env-step budget per run.", flag_values=values)
    flags.DEFINE_integer("every", 100_000, "Env steps between exact checks.", flag_values=values)
    flags.DEFINE_list("run_dirs", [], "Measure these distributed runs instead.", flag_values=values)
    flags.DEFINE_float(
        "target_return", 0.0, "run_dirs of a return env: their target.", flag_values=values
    )
    flags.DEFINE_string("out", None, "Append the rows to this JSON-lines file.", flag_values=values)
    return values


def main(argv=None) -> list:
    args = _flags()
    argv = [sys.argv[0], *(sys.argv[1:] if argv is None else argv)]

    given = several_overrides(args, argv, __doc__)
    if args.target_return < 0:
        cli.fail(f"--target_return={args.target_return}: a return target is >= 0 (0: none)")
    rows = [from_run_dir(d, args.env_steps, args.target_return) for d in args.run_dirs]
    for name in args.configs if not rows else ():
        for seed in (int(s) for s in args.seeds):
            rows.append(run_one(name, seed, args.env_steps, args.every, given.of(name)))
            _emit(rows[-1], args.out)
    for row in rows[: len(args.run_dirs)]:
        _emit(row, args.out)
    return rows


def _emit(row: dict, out: str | None) -> None:
    """Prints the row without its curve; appends it whole to `out`."""
    emit_row(row, out, {k: v for k, v in row.items() if k != "curve"})


if __name__ == "__main__":
    main()
