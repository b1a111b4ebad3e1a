"""Slippery maps against the exact optimum, with the single-process trainer.

For each config (configs/<name>.py: its agent fields, map and target_of_optimal) and
seed, `distrl.local.train` runs until 10,000 greedy episodes confirm the target (the
success's 95% lower bound at `target_of_optimal` x the exact optimal success) or
the budget ends. After each jitted call (50 iterations of B=16 envs x T=16 steps,
12,800 env steps) the greedy policy's exact success is computed (`envs.exact`):
the first call at which it reaches 95% and 98% of the optimum gives the env steps
and wall time (including compilation) reported.

    .venv/bin/python -m benchmarks.slippery --configs=dqn_slippery8x8,a2c_slippery8x8 \
        --seeds=0,1,2 [--map=4x4] [--env_steps=3000000] [--out=runs/slippery.json] \
        [--config.agent.learning_rate=3e-4] [--dqn_slippery8x8.agent.n_step=3]

Config overrides as launch/train.py takes them: `--config.<section>.<field>=<value>`
for every config, `--<config name>.<section>.<field>=<value>` for one; applied after
`--map`, before this benchmark's fixed batch and budget; checked before any run.
"""

import json
import os
import re
import sys

from absl import flags

from benchmarks.common import emit_row, load_config, python_cmd, run_subprocess, several_overrides
from distrl import cli, local


def first_reach(history, optimal: float, fraction: float):
    """(env steps, seconds) of the first call whose exact success >= fraction x optimal."""
    for steps, seconds, success in history:
        if success >= fraction * optimal:
            return steps, round(seconds, 1)
    return None, None


def run_one(name: str, seed: int, map_name: str | None, env_steps: int, overrides=None) -> dict:
    config = load_config(name, {**({"env.map": map_name} if map_name else {}), **(overrides or {})})
    config.seed, config.num_actors = seed, 1
    config.actor.update(dict(num_envs=16, unroll_length=16))
    config.local.update(dict(eval_every=20, iterations_per_call=50, xla_opt_level=-1))
    config.budget.update(dict(env_steps=env_steps, seconds=0.0))
    # this benchmark's fixed settings: DQN's replay of 100k transitions; one on-policy
    # update per [16, 16] rollout (each field is read by its pipeline only)
    config.replay.max_size = 100_000
    config.learner.batch_chunks = 1
    result = local.train(config)
    answer = result.exact
    row = dict(
        config=name,
        map=config.env.map,
        seed=seed,
        solved=result.solved,
        env_steps=result.env_steps,
        wall=round(result.wall_time, 1),
        success=round(result.success_rate, 4),
        success_low=round(result.success_low, 4),
        exact_success=round(answer["success"], 4),
        optimal_success=round(answer["optimal_success"], 4),
        ratio=round(answer["ratio"], 4),
    )
    for fraction in (0.95, 0.98):
        steps, seconds = first_reach(result.history, answer["optimal_success"], fraction)
        row[f"steps_{fraction:.0%}"], row[f"wall_{fraction:.0%}"] = steps, seconds
    return row


_SUMMARY = re.compile(
    r"solved=(?P<solved>\w+) env_steps=(?P<env_steps>\d+) .*"
    r"wall=(?P<wall>[\d.]+)s \(compile (?P<compile>[\d.]+)s, "
)


def as_a_user(name: str, seed: int, directory: str, timeout: float) -> dict:
    """configs/<name>.py single-process, the way a user runs it (`python -m distrl.local
    --config=configs/<name>.py --config.seed=<seed>`, every default as it is) and with
    this benchmark's settings (`run_one`), one after the other, each in its own process.
    Per mode: solved, env steps, the trainer's wall time (compile included), the
    command's time from start to exit; or the error."""
    os.makedirs(directory, exist_ok=True)
    rows = os.path.join(directory, "bench.jsonl")
    commands = {
        "user": python_cmd(
            "distrl.local", f"--config=configs/{name}.py", f"--config.seed={seed}", "--quiet"
        ),
        "bench": python_cmd(
            "benchmarks.slippery", f"--configs={name}", f"--seeds={seed}", f"--out={rows}"
        ),
    }
    out = {"config": name, "seed": seed}
    for mode, command in commands.items():
        log = os.path.join(directory, f"{mode}.log")
        proc = run_subprocess(command, timeout, log)
        with open(log) as f:
            found = _SUMMARY.search(f.read()) if mode == "user" else None
        if mode == "bench" and os.path.exists(rows):
            with open(rows) as f:
                found = json.loads(f.readlines()[-1])
        if proc["rc"] != 0 or not found:
            why = "timed out" if proc["timed_out"] else f"rc {proc['rc']}"
            out[mode] = {"error": f"{why}, no summary (see {log})"}
            continue
        figures = found if mode == "bench" else found.groupdict()
        out[mode] = dict(
            solved=str(figures["solved"]) == "True",
            env_steps=int(figures["env_steps"]),
            wall=float(figures["wall"]),
            command_wall=round(proc["wall"], 1),
        )
    return out


def _flags():
    values = flags.FlagValues()
    flags.DEFINE_list(
        "configs",
        ["dqn_slippery8x8", "a2c_slippery8x8", "ppo_slippery8x8"],
        "Config names (configs/<name>.py).",
        flag_values=values,
    )
    flags.DEFINE_list("seeds", ["0", "1", "2"], "Seeds, comma-separated.", flag_values=values)
    cli.require_integers("seeds", values)
    flags.DEFINE_string("map", None, "Override the configs' map, e.g. 4x4.", flag_values=values)
    flags.DEFINE_integer("env_steps", 3_000_000, "Env-step budget per run.", flag_values=values)
    flags.DEFINE_string("out", None, "Append the rows to this JSON-lines file.", flag_values=values)
    return values


def main(argv=None) -> list:
    args = _flags()
    argv = [sys.argv[0], *(sys.argv[1:] if argv is None else argv)]

    given = several_overrides(args, argv, __doc__, lambda a: {"env.map": a.map} if a.map else {})
    rows = []
    for name in args.configs:
        for seed in (int(s) for s in args.seeds):
            rows.append(run_one(name, seed, args.map, args.env_steps, given.of(name)))
            emit_row(rows[-1], args.out)
    return rows


if __name__ == "__main__":
    main()
