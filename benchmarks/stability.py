"""Stable learning at a fixed budget: the greedy policy's exact success over a run
with no target, single-process (issue 30 item 2).

For each config (configs/<name>.py, as a user runs it: its batch, replay and agent)
and seed, `distrl.local.train` runs the whole env-step budget with the targets off
(`evaluator.target_of_optimal = target_success = 0`). After every jitted call of
about `--every` env steps (the distributed evaluator's cadence,
`evaluator.every_env_steps`) the greedy policy's exact success is computed
(`envs.exact`); the row reports, as shares of the exact optimum, the minimum and
mean over the calls in the second half of the budget and the final policy's.

    .venv/bin/python -m benchmarks.stability --configs=dqn_slippery8x8 --seeds=11,12 \
        [--env_steps=4000000] [--every=100000] [--out=runs/stability.jsonl] \
        [--config.agent.learning_rate=3e-4] [--dqn_slippery8x8.agent.n_step=3]

Config overrides as in benchmarks/slippery.py; checked before any run.

A distributed run (`launch/train.py` with the targets off and the same budget) is
measured the same way from its evaluator's log, one row per evaluation:

    .venv/bin/python -m benchmarks.stability --run_dirs=runs/a,runs/b [--env_steps=4000000]
"""

import csv
import os
import sys

from absl import flags

from benchmarks.common import emit_row, load_config, several_overrides
from distrl import cli, local

GOAL_MIN, GOAL_FINAL = 0.95, 0.98  # the goal: every second-half point, the final


def second_half(history, budget: int, optimal: float) -> dict:
    """min / mean exact success (share of `optimal`) over the calls past budget / 2,
    the final call's, and whether they meet the goal. history: (steps, s, success)."""
    late = [s / optimal for steps, _, s in history if steps > budget / 2]
    final = history[-1][2] / optimal
    return dict(
        min=round(min(late), 4),
        mean=round(sum(late) / len(late), 4),
        final=round(final, 4),
        points=len(late),
        ok=min(late) >= GOAL_MIN and final >= GOAL_FINAL,
    )


def run_one(name: str, seed: int, env_steps: int, every: int, overrides=None) -> dict:
    config = load_config(name, overrides or {})
    config.seed = seed
    config.evaluator.update(dict(target_of_optimal=0.0, target_success=0.0, target_return=0.0))
    config.budget.update(dict(env_steps=env_steps, seconds=0.0, learner_steps=0))
    per_iteration = config.num_actors * config.actor.num_envs * config.actor.unroll_length
    calls = max(1, round(every / per_iteration))
    # the exact success after every call is the measure; no sampled evaluation between
    config.local.update(dict(iterations_per_call=calls, eval_every=10**9, xla_opt_level=-1))
    result = local.train(config)
    optimal = result.exact["optimal_success"]
    return dict(
        config=name,
        seed=seed,
        overrides={k: v for k, v in (overrides or {}).items()},
        env_steps=result.env_steps,
        updates=result.updates,
        wall=round(result.wall_time, 1),
        optimal=round(optimal, 4),
        **second_half(result.history, env_steps, optimal),
        curve=[(steps, round(s, 3)) for steps, _, s in result.history],
    )


def from_run_dir(run_dir: str, env_steps: int) -> dict:
    """The same figures from a distributed run's `logs/evaluator.csv` (an evaluation
    every `evaluator.every_env_steps`; the last row is the final policy's)."""
    with open(os.path.join(run_dir, "logs", "evaluator.csv")) as f:
        rows = [r for r in csv.DictReader(f) if r.get("exact_success")]
    history = [
        (int(float(r["env_steps"])), float(r["elapsed"]), float(r["exact_success"])) for r in rows
    ]
    optimal = float(rows[-1]["optimal_success"])
    return dict(
        run_dir=run_dir,
        env_steps=history[-1][0],
        optimal=round(optimal, 4),
        **second_half(history, env_steps, optimal),
        curve=[(steps, round(s, 3)) for steps, _, s in history],
    )


def _flags():
    values = flags.FlagValues()
    flags.DEFINE_list("configs", ["dqn_slippery8x8"], "Config names.", flag_values=values)
    flags.DEFINE_list("seeds", ["11", "12", "13", "14", "15"], "Seeds.", flag_values=values)
    cli.require_integers("seeds", values)
    flags.DEFINE_integer("env_steps", 4_000_000, "Env-step budget per run.", flag_values=values)
    flags.DEFINE_integer("every", 100_000, "Env steps between exact checks.", flag_values=values)
    flags.DEFINE_list("run_dirs", [], "Measure these distributed runs instead.", flag_values=values)
    flags.DEFINE_string("out", None, "Append the rows to this JSON-lines file.", flag_values=values)
    return values


def main(argv=None) -> list:
    args = _flags()
    argv = [sys.argv[0], *(sys.argv[1:] if argv is None else argv)]

    given = several_overrides(args, argv, __doc__)
    rows = [from_run_dir(d, args.env_steps) for d in args.run_dirs]
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
