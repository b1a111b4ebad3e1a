"""The pipeline study (docs/learning.md, "The pipeline study" and "Continuous control"),
rebuilt by one command.

Gridworld parts: five slippery 8x8 presets (replay: DQN, prioritized DQN; on-policy:
PPO, A2C, V-trace). Continuous parts: SAC and TD3 (replay) against PPO (queue) on
gymnax Pendulum-v1 and gymnasium's MuJoCo HalfCheetah-v5. All distributed (`local_mp`,
2 actors), the same seeds, one run at a time, each part a `launch/compare.py` run
into <out>/<part>/:

- `slippery`: slippery 8x8 until 10,000 greedy episodes confirm the presets' 98% of
  the exact optimum, within their budget (6M env steps, 900 s);
- `deterministic`: the same presets with `env.slippery=False`;
- `fixed`: slippery 8x8 with every target off for a fixed budget of 4M env steps
  (`--fixed_env_steps`), the run's policy the LAST one (`evaluator.keep_best=False`),
  plus, per run, the lowest exact success of the evaluations in the budget's second
  half (`benchmarks.stability.from_run_dir`): does a pipeline stay learned;
- `pendulum_steps` / `pendulum_seconds`: the Pendulum presets with the target off, at
  equal env steps (`--continuous_env_steps`, 100k) and at equal wall seconds
  (`--continuous_seconds`, 120), plus the greedy mean return each config had reached
  at a quarter, half and all of the budget (mean [min-max] over seeds);
- `halfcheetah_steps` / `halfcheetah_seconds`: the same for the MuJoCo presets
  (configs/*_mujoco.py, no target of their own: the report gives the env steps and
  seconds to a greedy lower bound of 1,000), at equal env steps
  (`--halfcheetah_env_steps`, 50k) and at equal wall seconds (`--halfcheetah_seconds`,
  300: SAC's and TD3's one update per env step reach about those 50k in it here).

<out>/study.md gathers the parts' summary tables (each part's report.md has the
definitions, curves and per-run tables).

    .venv/bin/python -m benchmarks.study [--seeds=41,42,43] [--parts=slippery,fixed] \
        [--configs=dqn_slippery8x8,ppo_slippery8x8] [--out=runs/study] [--report_only]

`--configs` replaces every chosen part's own configs. `--report_only` rewrites the
reports and study.md from the runs already in <out>. Flags beyond these go to every
compare.py run (`--config.<section>.<field>=<value>`).
"""

import dataclasses
import os
import subprocess
import sys

import numpy as np
from absl import flags

from benchmarks import stability
from benchmarks.common import ROOT
from distrl import cli, metrics
from distrl.analysis import compare, compare_report

GRIDWORLD = (
    "dqn_slippery8x8",
    "dqn_prioritized_slippery8x8",
    "ppo_slippery8x8",
    "a2c_slippery8x8",
    "vtrace_slippery8x8",
)
PENDULUM = ("sac_pendulum", "td3_pendulum", "ppo_pendulum")
HALFCHEETAH = ("sac_mujoco", "td3_mujoco", "ppo_mujoco")
_TARGET_OFF = ["--config.evaluator.keep_best=False"]


@dataclasses.dataclass(frozen=True)
class Part:
    title: str
    configs: tuple
    flags: tuple = ()  # compare.py flags beyond the shared ones
    budget: str = "target"  # target: to a target within a budget; env_steps / seconds: fixed
    amount: str = ""  # the flag holding a fixed budget's env steps or seconds


PARTS = {
    "slippery": Part("Slippery 8x8, to the confirmed 98% of the exact optimum", GRIDWORLD),
    "deterministic": Part(
        "Deterministic 8x8, to the goal", GRIDWORLD, ("--config.env.slippery=False",)
    ),
    "fixed": Part(
        "Slippery 8x8, a fixed budget with the target off: the last policy",
        GRIDWORLD,
        ("--config.evaluator.target_of_optimal=0", *_TARGET_OFF),
        budget="env_steps",
        amount="fixed_env_steps",
    ),
    "pendulum_steps": Part(
        "Pendulum-v1, SAC and TD3 (replay) against PPO (queue) at equal env steps",
        PENDULUM,
        ("--target_return=-200", *_TARGET_OFF),
        budget="env_steps",
        amount="continuous_env_steps",
    ),
    "pendulum_seconds": Part(
        "Pendulum-v1, SAC and TD3 (replay) against PPO (queue) at equal wall seconds",
        PENDULUM,
        ("--target_return=-200", *_TARGET_OFF),
        budget="seconds",
        amount="continuous_seconds",
    ),
    "halfcheetah_steps": Part(
        "HalfCheetah-v5, SAC and TD3 (replay) against PPO (queue) at equal env steps",
        HALFCHEETAH,
        ("--target_return=1000", *_TARGET_OFF),
        budget="env_steps",
        amount="halfcheetah_env_steps",
    ),
    "halfcheetah_seconds": Part(
        "HalfCheetah-v5, SAC and TD3 (replay) against PPO (queue) at equal wall seconds",
        HALFCHEETAH,
        ("--target_return=1000", *_TARGET_OFF),
        budget="seconds",
        amount="halfcheetah_seconds",
    ),
}
GRIDWORLD_PARTS = ("slippery", "deterministic", "fixed")


def _flags():
    values = flags.FlagValues()
    flags.DEFINE_list(
        "configs", [], "Config names for every part (default: each part's own).", flag_values=values
    )
    flags.DEFINE_list("seeds", ["41", "42", "43"], "Seeds of every part.", flag_values=values)
    cli.require_integers("seeds", values)
    flags.DEFINE_list("parts", list(PARTS), f"A subset of {list(PARTS)}.", flag_values=values)
    flags.DEFINE_string("out", "runs/study", "Output directory.", flag_values=values)
    flags.DEFINE_integer("env_steps", 6_000_000, "Budget to a target.", flag_values=values)
    flags.DEFINE_float("seconds", 900.0, "Wall-time budget to a target.", flag_values=values)
    flags.DEFINE_integer(
        "fixed_env_steps", 4_000_000, "The `fixed` part's budget.", flag_values=values
    )
    flags.DEFINE_integer(
        "continuous_env_steps", 100_000, "pendulum_steps' budget.", flag_values=values
    )
    flags.DEFINE_float(
        "continuous_seconds", 120.0, "pendulum_seconds' wall-time budget.", flag_values=values
    )
    flags.DEFINE_integer(
        "halfcheetah_env_steps", 50_000, "halfcheetah_steps' budget.", flag_values=values
    )
    flags.DEFINE_float(
        "halfcheetah_seconds", 300.0, "halfcheetah_seconds' wall-time budget.", flag_values=values
    )
    flags.DEFINE_bool("report_only", False, "Run nothing; rewrite the reports.", flag_values=values)
    return values


def configs(part: str, args) -> list:
    return list(args.configs or PARTS[part].configs)


def budget_flags(part: str, args) -> list:
    """compare.py's budget flags of a part."""
    spec = PARTS[part]
    if spec.budget == "seconds":
        return ["--env_steps=0", f"--seconds={getattr(args, spec.amount):g}"]
    if spec.budget == "env_steps":
        return [f"--env_steps={getattr(args, spec.amount)}", "--seconds=0"]
    return [f"--env_steps={args.env_steps}", f"--seconds={args.seconds:g}"]


def compare_command(part: str, args, extra) -> list:
    """The launch/compare.py command of one part."""
    return [
        sys.executable,
        os.path.join(ROOT, "launch", "compare.py"),
        f"--configs={','.join(configs(part, args))}",
        f"--seeds={','.join(args.seeds)}",
        *(["--map=8x8"] if part in GRIDWORLD_PARTS else []),
        "--num_actors=2",
        *budget_flags(part, args),
        *PARTS[part].flags,
        f"--out={os.path.join(args.out, part)}",
        *(["--report_only"] if args.report_only else []),
        *extra,
    ]


def summary_table(report_path: str) -> str:
    """The summary table of a compare.py report.md (its first markdown table)."""
    with open(report_path) as f:
        lines = f.read().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    return "\n".join(lines[start:end])


def stayed_learned(args) -> str:
    """Per run of the `fixed` part: the lowest and the last exact success over the
    second half of the budget (shares of the optimum) and the goal (`stability`'s)."""
    rows = [
        "| config | seed | second-half min | final | >= 95% / >= 98% |",
        "|---|---|---|---|---|",
    ]
    for name in configs("fixed", args):
        for seed in args.seeds:
            run_dir = os.path.join(args.out, "fixed", name, f"seed{seed}")
            try:
                r = stability.from_run_dir(run_dir, args.fixed_env_steps)
            except (OSError, IndexError, KeyError, ValueError) as err:
                rows.append(f"| {name} | {seed} | no evaluations ({type(err).__name__}) | | |")
                continue
            verdict = "yes" if r["ok"] else "no"
            rows.append(f"| {name} | {seed} | {r['min']:.1%} | {r['final']:.1%} | {verdict} |")
    return "\n".join(rows)


def return_at(data, axis: str, point: float) -> float:
    """The greedy mean return of the last evaluation at or before `point` on `axis`
    (env steps, or training seconds from compare's origin), NaN before the first."""
    x = data["elapsed"] - compare.training_origin(data) if axis == "seconds" else data["env_steps"]
    at = np.flatnonzero(x <= point)
    return float(data["mean_return"][at[-1]]) if len(at) else np.nan


def returns_at_equal_budget(part: str, args) -> str:
    """Per config: the greedy mean return (mean [min-max] over seeds) reached at a
    quarter, half and all of a fixed budget: the comparison at equal env steps or
    equal wall seconds."""
    axis, total = PARTS[part].budget, getattr(args, PARTS[part].amount)
    points = [total / 4, total / 2, total]
    unit = "s" if axis == "seconds" else "env steps"
    rows = [
        "| config | " + " | ".join(f"return at {p:,.0f} {unit}" for p in points) + " |",
        "|---|" + "---|" * len(points),
    ]
    for name in configs(part, args):
        runs = []
        for seed in args.seeds:
            path = metrics.csv_path(os.path.join(args.out, part, name, f"seed{seed}"), "evaluator")
            data = metrics.read_csv(path) if os.path.exists(path) else {}
            if data and len(data["step"]):
                runs.append([return_at(data, axis, p) for p in points])
        cells = [compare_report.spread(list(col), "ratio") for col in zip(*runs)]
        rows.append(f"| {name} | " + " | ".join(cells or ["no runs"] * len(points)) + " |")
    return "\n".join(rows)


def main(argv=None) -> int:
    args = _flags()
    argv = [sys.argv[0], *(sys.argv[1:] if argv is None else argv)]
    extra = args(argv, known_only=True)[1:]  # overrides go to compare.py, which checks them
    unknown = sorted(set(args.parts) - set(PARTS))
    if unknown:
        cli.fail(f"bad flag: --parts: unknown {unknown}; valid: {', '.join(PARTS)}")
    args.out = os.path.abspath(args.out)
    sections = [f"# The pipeline study: seeds {', '.join(args.seeds)}"]
    status = 0
    for part in args.parts:
        code = subprocess.call(compare_command(part, args, extra), cwd=ROOT)
        status = status or code
        report = os.path.join(args.out, part, "report.md")
        title = PARTS[part].title
        if not os.path.exists(report):
            sections.append(f"## {title}\n\nno report (compare.py exit {code})")
            continue
        sections.append(f"## {title}\n\n{summary_table(report)}\n\n(details: `{part}/report.md`)")
        if part == "fixed":
            sections.append(stayed_learned(args))
        elif PARTS[part].budget != "target":
            sections.append(returns_at_equal_budget(part, args))
    with open(os.path.join(args.out, "study.md"), "w") as f:
        f.write("\n\n".join(sections) + "\n")
    print(f"study: {os.path.join(args.out, 'study.md')}")
    return status


if __name__ == "__main__":
    sys.exit(main())
