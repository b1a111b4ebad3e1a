"""Compare configs over seeds on one map and one budget; write a report.

    python launch/compare.py --configs=dqn,ppo,a2c --seeds=0,1,2 --map=4x4 \
        --num_actors=2 --env_steps=200000 --target=1.0 --out=runs/compare-4x4

Every config gets the same map, number of actors, budget (env steps and/or wall
seconds) and seeds. Fields are overridden as launch/train.py takes them:
`--config.<section>.<field>=<value>` in every config, `--<name>.<section>.<field>=<value>`
in config <name> alone (e.g. `--ppo.actor.num_envs=32`, for a config name that is
an identifier), over `--config.`'s. All runs' configs are resolved and validated
before the first run starts: a bad flag, field, value or config exits 2 with one
line. Runs go one after another (each a `launch/train.py` process with its own run
directory, <out>/<config>/seed<k>/), then <out> gets report.md
(setup, summary table, definitions, per-run table), runs.csv (raw numbers) and
curves.png (the greedy policy's exact success as a share of the optimum's, and the
sampled greedy success rate, against env steps and training time: mean over seeds
and min-max band). The report gives the final exact success against the optimum,
env steps and time to 95% and 98% of it, samples per insert, data age and
throughput. On an env without a success signal (`--config.env.name=gymnax:CartPole-v1`)
the report compares the result policy's greedy mean return with its 95% interval
instead, and env steps and time to `--target_return` (its lower bound). A config
with `evaluator.target_of_optimal` ends each run at that
confirmed share; otherwise runs use the whole budget (`--stop_at_target` ends each
at --target instead). `--report_only` runs nothing and rewrites <out>'s report from
the runs there (e.g. after more configs were run into the same --out).
"""

import datetime
import os
import platform
import subprocess
import sys
import time

from absl import flags

from distrl import cli
from distrl import config as config_lib
from distrl.analysis import compare, compare_report, plots
from distrl.envs import section as env_section

_FLAGS = flags.FlagValues()  # this command's; cli.parse_several adds the override flags
_CONFIGS = flags.DEFINE_list(
    "configs",
    ["dqn", "ppo", "a2c"],
    "Config names (configs/<name>.py) or config file paths.",
    flag_values=_FLAGS,
)
_SEEDS = flags.DEFINE_list(
    "seeds", ["0", "1", "2"], "Seeds; every config runs each.", flag_values=_FLAGS
)
cli.require_integers("seeds", _FLAGS)
_MAP = flags.DEFINE_string("map", "4x4", "Map of every run (config.env.map).", flag_values=_FLAGS)
_ACTORS = flags.DEFINE_integer("num_actors", 2, "Actors of every run.", flag_values=_FLAGS)
_ENV_STEPS = flags.DEFINE_integer(
    "env_steps", 200_000, "Env-step budget per run (0: none).", flag_values=_FLAGS
)
_SECONDS = flags.DEFINE_float(
    "seconds", 0.0, "Wall-time budget per run in seconds (0: none).", flag_values=_FLAGS
)
_TARGET = flags.DEFINE_float(
    "target", 1.0, "Success rate whose first reaching is reported.", flag_values=_FLAGS
)
_TARGET_RETURN = flags.DEFINE_float(
    "target_return",
    0.0,
    "Envs without a success signal (e.g. gymnax:CartPole-v1): the greedy mean return "
    "whose lower bound's first reaching is reported (0: none).",
    flag_values=_FLAGS,
)
_STOP_AT_TARGET = flags.DEFINE_bool(
    "stop_at_target", False, "End each run at the target.", flag_values=_FLAGS
)
_OUT = flags.DEFINE_string(
    "out", None, "Output directory (default runs/compare-<time>).", flag_values=_FLAGS
)
_LAUNCH = flags.DEFINE_enum(
    "launch_type", "local_mp", ["local_mp", "test_mt"], "How runs launch.", flag_values=_FLAGS
)
_TIMEOUT = flags.DEFINE_float(
    "run_timeout", 3600.0, "Seconds before a run is killed.", flag_values=_FLAGS
)
_REPORT_ONLY = flags.DEFINE_bool(
    "report_only",
    False,
    "Runs nothing: rewrites <out>'s report from the runs already there.",
    flag_values=_FLAGS,
)


def _shared() -> dict:
    """What every run gets. With --stop_at_target a run ends at --target_return when
    that is set (an env without a success signal), else at the success --target."""
    stop, by_return = _STOP_AT_TARGET.value, bool(_TARGET_RETURN.value)
    return {
        "env.map": _MAP.value,
        "num_actors": _ACTORS.value,
        "budget.env_steps": _ENV_STEPS.value,
        "budget.seconds": _SECONDS.value,
        "budget.learner_steps": 0,
        "evaluator.target_success": _TARGET.value if stop and not by_return else 0.0,
        "evaluator.target_return": _TARGET_RETURN.value if stop else 0.0,
    }


def _env_name(config) -> str:
    """The map of a gridworld run, else its env's name."""
    if config.env.name == env_section.GRIDWORLD:
        return config.env.map
    return config.env.name


def _target_line() -> str:
    if _TARGET_RETURN.value:
        return f"target return {_TARGET_RETURN.value:g} (the greedy mean's lower bound"
    return f"target success rate {_TARGET.value:.2f} (greedy"


def _setup_lines(specs, out: str) -> list:
    first = specs[0].config
    budget = ", ".join(
        filter(
            None,
            [
                f"{first.budget.env_steps:,} env steps" if first.budget.env_steps else "",
                f"{first.budget.seconds:g} s wall time" if first.budget.seconds else "",
            ],
        )
    )
    if first.evaluator.target_of_optimal:
        budget += (
            f"; each run ends once {first.evaluator.confirm_envs:,} greedy "
            f"episodes confirm {first.evaluator.target_of_optimal:.0%} of the exact optimum"
        )
    configs = "; ".join(
        f"`{s.name}`: {s.config.algorithm}, {s.pipeline.describe(s.config)}, "
        f"learner batch {s.pipeline.describe_batch(s.config)}"
        for s in specs
        if s.seed == specs[0].seed
    )
    machine = platform.processor() or platform.machine()
    where = (
        f"Map `{first.env.map}` (slippery: {first.env.slippery})"
        if first.env.name == env_section.GRIDWORLD
        else f"Env `{first.env.name}`"
    )
    return [
        (
            f"{where}, {first.num_actors} actors"
            f" x {first.actor.num_envs} envs, unroll {first.actor.unroll_length}"
        ),
        (
            f"Budget per run: {budget}; {_target_line()}, "
            f"{first.evaluator.num_envs} episodes every {_cadence(first.evaluator)}); "
            f"seeds {', '.join(_SEEDS.value)}"
        ),
        f"Configs: {configs}",
        (
            f"Runs one after another, launch `{_LAUNCH.value}`, on {os.cpu_count()} CPU cores "
            f"({machine}); distrl {_commit()}; {datetime.datetime.now():%Y-%m-%d %H:%M}"
        ),
        "Command: `python " + " ".join(sys.argv) + "`",
        f"Run directories: `{out}/<config>/seed<k>/` (config.json, logs, TensorBoard, plots)",
    ]


def _cadence(evaluator) -> str:
    """How often the runs are evaluated, in the config's own unit."""
    if evaluator.every_env_steps:
        return f"{evaluator.every_env_steps:,} env steps"
    return f"{evaluator.every_seconds:g} s"


def _commit() -> str:
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            cwd=compare.ROOT,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain"],
            capture_output=True,
            text=True,
            cwd=compare.ROOT,
            check=True,
        ).stdout.strip()
        return f"commit {head}" + (" with local changes" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "(no git commit)"


def _run_all(specs) -> list:
    rows = []
    for i, spec in enumerate(specs, 1):
        print(
            f"[{i}/{len(specs)}] {spec.name} seed {spec.seed} ... (log: {spec.run_dir}/train.log)",
            flush=True,
        )
        start = time.time()
        code = compare.run_one(spec, _LAUNCH.value, _TIMEOUT.value)
        row = compare.summarize(spec, _TARGET.value, code, _TARGET_RETURN.value)
        rows.append(row)
        final = (
            f"final success {compare_report.fmt(row.get('final_success'), 'rate')}"
            if row.get("has_success", True)
            else f"final return {compare_report.fmt(row.get('final_return'), 'ratio')}"
        )
        print(
            f"    {time.time() - start:.0f} s, exit {code}, {row.get('stop_reason', '?')}, {final}",
            flush=True,
        )
    return rows


def _write_report(specs, rows, out: str) -> str:
    figures = []
    curves = compare.curves(specs)
    if curves:
        exact = any("exact_ratio" in run for runs in curves.values() for run in runs)
        success = any("success_rate" in run for runs in curves.values() for run in runs)
        panels = (("exact_ratio", "exact success / optimum"),) if exact else ()
        panels += (("success_rate", "greedy success rate"),) if success else ()
        panels = panels or (("mean_return", "greedy mean return"),)
        plots.plot_comparison(
            curves,
            (("env_steps", "env steps"), ("train_seconds", "training wall time (s)")),
            f"{len(curves)} configs on {_env_name(specs[0].config)}: mean and min-max over seeds",
            os.path.join(out, "curves.png"),
            target={
                "exact_ratio": compare.FRACTIONS,
                "success_rate": [_TARGET.value],
                "mean_return": [_TARGET_RETURN.value] if _TARGET_RETURN.value else [],
            },
            panels=panels,
        )
        caption = (
            "Greedy policy's exact success as a share of the optimum's (dashed: 95% and "
            "98%) and sampled greedy success rate"
            if success
            else "Greedy mean return (dashed: the target return)"
        ) + (
            " against env steps and training wall "
            "time; line: mean over seeds, band: min to max, up to the end of the "
            "shortest seed's run (runs stop at their target)."
        )
        figures.append(("curves.png", caption))
    pipelines = {s.name: s.pipeline.describe(s.config) for s in specs}
    title = f"{' vs '.join(pipelines)} on {_env_name(specs[0].config)}"
    text = compare_report.markdown(title, _setup_lines(specs, out), rows, pipelines, figures)
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write(text)
    compare_report.write_csv(rows, os.path.join(out, "runs.csv"))
    return text


def _report_only(seeds, out: str) -> int:
    """Rewrites the report of the runs already in `out` (e.g. after a change to it)."""
    found = compare.reload(_CONFIGS.value, seeds, out)
    if not found:
        print(f"compare: no runs of {','.join(_CONFIGS.value)} in {out}", file=sys.stderr)
        return 2
    specs = [spec for spec, _ in found]
    rows = [
        compare.summarize(spec, _TARGET.value, code, _TARGET_RETURN.value) for spec, code in found
    ]
    _write_report(specs, rows, out)
    print(f"compare: report of {len(rows)} runs {os.path.join(out, 'report.md')}")
    return 0


def main(argv) -> int:
    overrides = cli.parse_several(
        _FLAGS, argv, lambda _: compare.loadable(_CONFIGS.value), usage=__doc__
    )
    out = os.path.abspath(_OUT.value or f"runs/compare-{time.strftime('%Y%m%d-%H%M%S')}")
    seeds = [int(s) for s in _SEEDS.value]
    if _REPORT_ONLY.value:
        return _report_only(seeds, out)
    try:
        specs = compare.plan(_CONFIGS.value, seeds, out, _shared(), overrides)
    except config_lib.ConfigError as err:
        cli.fail(f"bad config: {err}")
    os.makedirs(out, exist_ok=True)
    print(f"compare: {len(specs)} runs into {out}", flush=True)
    rows = _run_all(specs)
    text = _write_report(specs, rows, out)
    print(text.split("## Runs")[0])
    print(f"compare: report {os.path.join(out, 'report.md')}")
    return 0 if all(r["returncode"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
