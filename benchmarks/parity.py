"""PPO per env step against a peer: `distrl.local` and the fused one-file loop
(`benchmarks/fused_ppo.py`, PureJaxRL's shape) trained from the same seed for the same
iterations of T x B env steps, each final policy judged by the same evaluation
(`evaluation.make_evaluator`: `evaluator.confirm_envs` episodes, sampled where the preset
judges the sampled policy), seed by seed, side by side in one process. A gap is real
when the across-seed intervals of the two last-policy returns do not overlap.

    python -m benchmarks.parity --config=configs/ppo_breakout.py --seeds=51,52,53,54,55 \
        --env_steps=2000000 --record=STUDY      # rows to benchmarks/results/parity.csv
                                                # (or --out=FILE, e.g. from another machine)

Both programs share the env, the network (`distrl.networks`: the same params tree, so
one evaluation plays both) and the settings; the fused loop records its own minibatch
shuffle, advantages and losses (its docstring says which).
"""

import datetime
import math
import os
import shlex
import sys

import jax
import numpy as np

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchmarks import fused_ppo
from benchmarks.aggregate import bootstrap_interval
from benchmarks.common import ROOT, append_csv, device_fields, head_commit
from distrl import experiment as experiment_lib
from distrl import local
from distrl.acting import evaluation

CSV = os.path.join(ROOT, "benchmarks", "results", "parity.csv")
COLUMNS = (
    "study", "date", "commit", "commit_source", "command", "load", "platform", "device",
    "config", "program", "seed", "env_steps", "mean_return", "return_low", "return_high",
    "episodes", "wall_s", "note",
)  # fmt: skip
PROGRAMS = ("distrl.local", "fused")


def iterations_for(config, env_steps: int) -> int:
    """Whole iterations of T x B env steps that reach `env_steps`."""
    s = fused_ppo.settings_of(config)
    return math.ceil(env_steps / (s.steps * s.num_envs))


def seeded(config, seed: int, env_steps: int):
    """`config` at `seed`, its budget exactly `env_steps`, no target to stop it early."""
    config = config.copy_and_resolve_references()
    config.seed = seed
    config.budget.env_steps = env_steps
    config.budget.seconds = 0.0
    config.evaluator.update(dict(target_return=0.0, target_success=0.0, target_of_optimal=0.0))
    return config


def final_evaluation(config, params, seed: int) -> dict:
    """The last policy's return over `evaluator.confirm_envs` episodes, as distrl.local's
    final evaluation plays it."""
    experiment = experiment_lib.Experiment(config)
    evaluate = evaluation.make_evaluator(
        experiment.env,
        experiment.agent,
        config.evaluator.confirm_envs,
        not config.evaluator.sampled,
        env_name=config.env.name,
    )
    ev = jax.device_get(evaluate(params, jax.random.PRNGKey(seed + 10_000)))
    return {
        "mean_return": float(ev.mean_return),
        "return_low": float(ev.return_low),
        "return_high": float(ev.return_high),
        "episodes": int(ev.episodes),
    }


def run_seed(config, seed: int, env_steps: int) -> list[dict]:
    """Both programs at one seed: a row each (program, env steps, last-policy return)."""
    config = seeded(config, seed, env_steps)
    ours = local.train(config)
    rows = [
        dict(
            program="distrl.local",
            env_steps=ours.env_steps,
            mean_return=ours.mean_return,
            return_low=ours.return_low,
            return_high=ours.return_high,
            episodes=ours.eval_episodes,
            wall_s=ours.wall_time,
        )
    ]
    figures, params = fused_ppo.run_to(config, env_steps, iterations_per_call=1)
    rows.append(
        dict(
            program="fused",
            env_steps=figures["env_steps"],
            wall_s=figures["wall_seconds"],
            **final_evaluation(config, params, seed),
        )
    )
    return [dict(r, seed=seed) for r in rows]


def summary(rows) -> str:
    """Each program's across-seed mean of the last-policy returns, its 95% bootstrap
    interval, and the seeds' returns."""
    lines = []
    for program in PROGRAMS:
        returns = [float(r["mean_return"]) for r in rows if r["program"] == program]
        if returns:
            low, high = bootstrap_interval(returns)
            seeds = ", ".join(f"{x:.1f}" for x in returns)
            lines.append(
                f"{program:>13}: {np.mean(returns):.2f} [{low:.2f}, {high:.2f}] over "
                f"{len(returns)} seeds ({seeds})"
            )
    return "\n".join(lines)


def _main():
    from absl import flags  # noqa: PLC0415

    from distrl import cli  # noqa: PLC0415

    holder = cli.define_config("configs/ppo_breakout.py")
    seeds = flags.DEFINE_list("seeds", ["51", "52", "53", "54", "55"], "Seeds, each run twice.")
    env_steps = flags.DEFINE_integer("env_steps", 2_000_000, "Env steps of each run.")
    record = flags.DEFINE_string("record", "", "Append the rows to parity.csv as this study.")
    out = flags.DEFINE_string("out", CSV, "--record: the CSV the rows go to.")

    def run(argv):
        del argv
        config = cli.load(holder)
        commit, dirty = head_commit()
        if record.value and dirty and os.path.abspath(out.value) == CSV:
            raise SystemExit("parity: commit first (rows name the commit they ran on)")
        s = fused_ppo.settings_of(config)
        steps = iterations_for(config, env_steps.value) * s.steps * s.num_envs
        rows = []
        for seed in map(int, seeds.value):
            load = os.getloadavg()[0]
            seed_rows = run_seed(config, seed, steps)
            for r in seed_rows:
                print(
                    f"seed {seed} {r['program']:>13}: return {r['mean_return']:.2f} "
                    f"[{r['return_low']:.2f}, {r['return_high']:.2f}]/{r['episodes']} "
                    f"at {r['env_steps']:,} env steps in {r['wall_s']:.0f} s",
                    flush=True,
                )
            rows += [dict(r, load=f"{load:.1f}") for r in seed_rows]
            if record.value:
                command = ["python", "-m", "benchmarks.parity", *sys.argv[1:]]
                command = [a for a in command if not a.startswith(("--seeds", "--record", "--out"))]
                context = dict(
                    study=record.value,
                    date=datetime.date.today().isoformat(),
                    commit=commit,
                    commit_source="recorded",
                    command=shlex.join([*command, f"--seeds={seed}"]),
                    note="uncommitted changes in the tree" * dirty,
                    config=os.path.basename(flags.FLAGS["config"].config_filename)[:-3],
                    **device_fields(),
                )
                append_csv(out.value, COLUMNS, [dict(context, **r) for r in seed_rows[-2:]])
        print(summary(rows))

    cli.run(run)


if __name__ == "__main__":
    _main()
