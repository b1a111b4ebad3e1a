"""The pipeline study (docs/learning.md, "The pipeline study"), rebuilt by one command.

Five slippery 8x8 presets (replay: DQN, prioritized DQN; on-policy: PPO, A2C,
V-trace), distributed (`local_mp`, 2 actors), the same seeds, one run at a time,
each part a `launch/compare.py` run into <out>/<part>/:

- `slippery`: slippery 8x8 until 10,000 greedy episodes confirm the presets' 98% of
  the exact optimum, within their budget (6M env steps, 900 s);
- `deterministic`: the same presets with `env.slippery=False`;
- `fixed`: slippery 8x8 with every target off for a fixed budget of 4M env steps
  (`--fixed_env_steps`), the run's policy the LAST one (`evaluator.keep_best=False`),
  plus, per run, the lowest exact success of the evaluations in the budget's second
  half (`benchmarks.stability.from_run_dir`): does a pipeline stay learned.

<out>/study.md gathers the three summary tables (each part's report.md has the
definitions, curves and per-run tables).

    .venv/bin/python -m benchmarks.study [--seeds=41,42,43] [--parts=slippery,fixed] \
        [--configs=dqn_slippery8x8,ppo_slippery8x8] [--out=runs/study] [--report_only]

`--report_only` rewrites the reports and study.md from the runs already in <out>.
Flags beyond these go to every compare.py run (`--config.<section>.<field>=<value>`).
"""

import os
import subprocess
import sys

from absl import flags

from benchmarks import stability
from benchmarks.common import ROOT
from distrl import cli

CONFIGS = (
    "dqn_slippery8x8",
    "dqn_prioritized_slippery8x8",
    "ppo_slippery8x8",
    "a2c_slippery8x8",
    "vtrace_slippery8x8",
)
# part: (title, compare.py flags beyond the shared ones)
PARTS = {
    "slippery": ("Slippery 8x8, to the confirmed 98% of the exact optimum", []),
    "deterministic": ("Deterministic 8x8, to the goal", ["--config.env.slippery=False"]),
    "fixed": (
        "Slippery 8x8, a fixed budget with the target off: the last policy",
        [
            "--config.evaluator.target_of_optimal=0",
            "--config.evaluator.keep_best=False",
            "--seconds=0",
        ],
    ),
}


def _flags():
    values = flags.FlagValues()
    flags.DEFINE_list("configs", list(CONFIGS), "Config names.", flag_values=values)
    flags.DEFINE_list("seeds", ["41", "42", "43"], "Seeds of every part.", flag_values=values)
    cli.require_integers("seeds", values)
    flags.DEFINE_list("parts", list(PARTS), f"A subset of {list(PARTS)}.", flag_values=values)
    flags.DEFINE_string("out", "runs/study", "Output directory.", flag_values=values)
    flags.DEFINE_integer("env_steps", 6_000_000, "Budget to a target.", flag_values=values)
    flags.DEFINE_float("seconds", 900.0, "Wall-time budget to a target.", flag_values=values)
    flags.DEFINE_integer(
        "fixed_env_steps", 4_000_000, "The `fixed` part's budget.", flag_values=values
    )
    flags.DEFINE_bool("report_only", False, "Run nothing; rewrite the reports.", flag_values=values)
    return values


def compare_command(part: str, args, extra) -> list:
    """The launch/compare.py command of one part."""
    budget = (
        [f"--env_steps={args.fixed_env_steps}"]
        if part == "fixed"
        else [f"--env_steps={args.env_steps}", f"--seconds={args.seconds:g}"]
    )
    return [
        sys.executable,
        os.path.join(ROOT, "launch", "compare.py"),
        f"--configs={','.join(args.configs)}",
        f"--seeds={','.join(args.seeds)}",
        "--map=8x8",
        "--num_actors=2",
        *budget,
        *PARTS[part][1],
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
    second half of the budget (shares of the optimum) and the issue's goal."""
    rows = [
        "| config | seed | second-half min | final | >= 95% / >= 98% |",
        "|---|---|---|---|---|",
    ]
    for name in args.configs:
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
        title = PARTS[part][0]
        if not os.path.exists(report):
            sections.append(f"## {title}\n\nno report (compare.py exit {code})")
            continue
        sections.append(f"## {title}\n\n{summary_table(report)}\n\n(details: `{part}/report.md`)")
        if part == "fixed":
            sections.append(stayed_learned(args))
    with open(os.path.join(args.out, "study.md"), "w") as f:
        f.write("\n\n".join(sections) + "\n")
    print(f"study: {os.path.join(args.out, 'study.md')}")
    return status


if __name__ == "__main__":
    sys.exit(main())
