"""Slippery maps against the exact optimum, with the single-process trainer.

For each config (configs/<name>.py: its agent fields, map and target_of_optimal) and
seed, `distrl.local.train` runs until 10,000 greedy episodes confirm the target (the
success's 95% lower bound at `target_of_optimal` x the exact optimal success) or
the budget ends. After each jitted call (50 iterations of B=16 envs x T=16 steps,
12,800 env steps) the greedy policy's exact success is computed (`envs.exact`):
the first call at which it reaches 95% and 98% of the optimum gives the env steps
and wall time (including compilation) reported.

    .venv/bin/python -m benchmarks.slippery --configs=dqn_slippery8x8,a2c_slippery8x8 \
        --seeds=0,1,2 [--map=4x4] [--env_steps=3000000] [--out=runs/slippery.json]
"""

import argparse
import json

from benchmarks.common import load_config
from distrl import local


def first_reach(history, optimal: float, fraction: float):
    """(env steps, seconds) of the first call whose exact success >= fraction x optimal."""
    for steps, seconds, success in history:
        if success >= fraction * optimal:
            return steps, round(seconds, 1)
    return None, None


def run_one(name: str, seed: int, map_name: str | None, env_steps: int) -> dict:
    config = load_config(name, {"env.map": map_name} if map_name else None)
    config.seed, config.num_actors = seed, 1
    config.actor.update(dict(num_envs=16, unroll_length=16))
    config.local.update(dict(eval_every=20, iterations_per_call=50, xla_opt_level=-1))
    config.budget.update(dict(env_steps=env_steps, seconds=0.0))
    # as measured: DQN's replay of 100k transitions; one on-policy update per [16, 16]
    # rollout (each field is read by its pipeline only)
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


def main(argv=None) -> list:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", default="dqn_slippery8x8,a2c_slippery8x8,ppo_slippery8x8")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--map", default=None, help="override the configs' map, e.g. 4x4")
    parser.add_argument("--env_steps", type=int, default=3_000_000)
    parser.add_argument("--out", default=None, help="append the rows to this JSON-lines file")
    args = parser.parse_args(argv)
    rows = []
    for name in args.configs.split(","):
        for seed in (int(s) for s in args.seeds.split(",")):
            row = run_one(name, seed, args.map, args.env_steps)
            print(json.dumps(row), flush=True)
            rows.append(row)
            if args.out:
                with open(args.out, "a") as f:
                    f.write(json.dumps(row) + "\n")
    return rows


if __name__ == "__main__":
    main()
