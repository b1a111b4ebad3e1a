"""Distributed on-policy vs the single-process trainer at the same per-update batch.

Each run is one subprocess, run one at a time, bounded by `--seconds`:
- `distributed`: the program under test_mt (`distrl.program.launcher.run`) with a
  configs/*.py file and overrides; the evaluator checks every 0.2 s. Reports the
  evaluated params' version (updates to solve), the env steps in the data those
  updates learned from (version x batch chunks x T x B: exact, unlike the
  counter's totals, which lag by their 0.1 s report period) and the data age.
  DQN (replay: data is sampled many times) reports the counter's env steps.
- `local`: `distrl.local.train` with B = the distributed batch's envs (actors x B
  for PPO's 2-chunk batch, B for A2C's 1-chunk batch) and the same T; its env
  steps are its updates x T x B.

    .venv/bin/python benchmarks/fresh.py --algo=ppo --seeds=0,1,2
    .venv/bin/python benchmarks/fresh.py --algo=dqn --config.env.map=8x8 \
        --config.replay.sampler=prioritized

`--config.<section>.<field>=<value>` overrides a field of configs/<algo>.py for the
distributed runs (as launch/train.py takes it), checked before any run starts; the
local runs keep their own fixed batch.
"""

import json
import os
import subprocess
import sys
import tempfile

from absl import flags

if __package__ in (None, ""):  # `python benchmarks/fresh.py`: make `benchmarks` importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchmarks.common import algo_overrides
from distrl import cli

_DISTRIBUTED = r"""
import ast, json, sys
sys.path.insert(0, "tests")
from conftest import load_config
from distrl import cli
from distrl.program import launcher
algo, seed, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
c = load_config(algo)
cli.apply_overrides(c, ast.literal_eval(sys.argv[4]))  # the overrides, as a dict's repr
c.seed, c.run_dir = seed, sys.argv[0]
c.evaluator.every_seconds = 0.2
c.checkpoint.every_seconds, c.checkpoint.replay = 0.0, False
c.budget.update(dict(env_steps=0, learner_steps=0, seconds=seconds))
result, _ = launcher.run(c, "test_mt")
version = result["param_version"]
per_update = c.learner.batch_chunks * c.actor.unroll_length * c.actor.num_envs
counted = result["counts"].get("env_steps")
print("RESULT " + json.dumps(dict(
    solved=result["stop_reason"] == "target_reached", updates=version,
    env_steps=counted if c.algorithm == "dqn" else version * per_update,
    counter_env_steps=counted,
    wall=result["wall_seconds"], **result["data"])), flush=True)
"""

_LOCAL = r"""
import json, sys
from distrl import local
algo, seed, envs, t = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
from distrl import cli
c = cli.load_file(algo)  # configs/<algo>.py, as one process: B = envs, one update per rollout
cli.apply_overrides(c, {"seed": seed, "num_actors": 1, "actor.num_envs": envs,
                        "actor.unroll_length": t, "learner.batch_chunks": 1,
                        "budget.env_steps": 3_000_000, "budget.seconds": 0.0,
                        "local.xla_opt_level": -1})
r = local.train(c)
print("RESULT " + json.dumps(dict(solved=r.solved, updates=r.updates, env_steps=r.env_steps,
                                  wall=r.wall_time)), flush=True)
"""


def _run(code, args, seconds):
    out = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=seconds + 120
    )
    lines = [x for x in out.stdout.splitlines() if x.startswith("RESULT ")]
    if not lines:
        return dict(error=(out.stdout[-300:] + out.stderr[-600:]).replace("\n", " | "))
    return json.loads(lines[-1][len("RESULT ") :])


def _flags():
    values = flags.FlagValues()
    flags.DEFINE_string("algo", "ppo", "Config to run (configs/<algo>.py).", flag_values=values)
    flags.DEFINE_list("seeds", ["0", "1", "2"], "Seeds, comma-separated.", flag_values=values)
    cli.require_integers("seeds", values)
    flags.DEFINE_float("seconds", 120.0, "Wall-time cap of each run.", flag_values=values)
    flags.DEFINE_enum(
        "only", None, ["distributed", "local"], "Run one kind only.", flag_values=values
    )
    return values


def main(argv=None):
    args = _flags()
    argv = [sys.argv[0], *(sys.argv[1:] if argv is None else argv)]
    overrides = algo_overrides(args, argv, __doc__)
    for seed in (int(s) for s in args.seeds):
        if args.only != "local":
            run_dir = tempfile.mkdtemp(prefix=f"fresh_{args.algo}_")
            code = _DISTRIBUTED.replace("sys.argv[0]", repr(run_dir))
            row = _run(
                code, [args.algo, str(seed), str(args.seconds), repr(overrides)], args.seconds
            )
            print(
                json.dumps(
                    dict(kind="distributed", algo=args.algo, seed=seed, overrides=overrides, **row)
                ),
                flush=True,
            )
        if args.only != "distributed":
            envs = 128 if args.algo in ("ppo", "grpo") else 64  # the distributed batch's envs
            row = _run(_LOCAL, [args.algo, str(seed), str(envs), "16"], args.seconds)
            print(
                json.dumps(
                    dict(kind="local", algo=args.algo, seed=seed, num_envs=envs, T=16, **row)
                ),
                flush=True,
            )


if __name__ == "__main__":
    main()
