"""Time to solve: wall time from a command's start to its exit once the target is met.

- `distributed`: `launch/train.py` (local_mp, or test_mt: the same program as threads
  of one process) as a subprocess with N actors; the evaluator stops the program at
  `evaluator.target_success`; wall = Popen to exit.
  Env steps and the stop reason come from the run's result.json.
- `local`: the single-process trainer (`distrl.local.train`, configs/<algo>.py) in a subprocess
  (`python -m benchmarks.solve local --algo=dqn`), which reports its own wall time
  (including compilation, excluding Python/JAX imports) beside the process's.
- `optimal_success`: the success rate the optimal greedy policy reaches on a map
  within the time limit, by value iteration (the slippery 8x8 target is 95% of it).
"""

import argparse
import json
import os
import sys

import numpy as np

from benchmarks.common import ROOT, override_flags, python_cmd, read_json, run_subprocess

_MOVES = ((0, -1), (1, 0), (0, 1), (-1, 0))  # LEFT DOWN RIGHT UP, as distrl.envs
_FIRST_EVAL = ("logs", "evaluator.csv")  # written at the evaluator's first evaluation


def transition_model(desc, slippery: bool, rewards=(1.0, -1.0, 0.0)):
    """(P [S, A, S] probabilities, R [S, A, S] rewards, terminal [S]) of a FrozenLake map."""
    rows, cols = len(desc), len(desc[0])
    n = rows * cols
    goal, hole, step = rewards
    reward_of = {"G": goal, "H": hole, "S": step, "F": step}
    p, r = np.zeros((n, 4, n)), np.zeros((n, 4, n))
    terminal = np.array([ch in "HG" for ch in "".join(desc)])
    for s in range(n):
        row, col = divmod(s, cols)
        for a in range(4):
            if terminal[s]:
                p[s, a, s] = 1.0  # absorbing, no reward
                continue
            for d in ((a - 1) % 4, a, (a + 1) % 4) if slippery else (a,):
                nr = min(max(row + _MOVES[d][0], 0), rows - 1)
                nc = min(max(col + _MOVES[d][1], 0), cols - 1)
                s2 = nr * cols + nc
                p[s, a, s2] += 1.0 / (3 if slippery else 1)
                r[s, a, s2] = reward_of[desc[nr][nc]]
    return p, r, terminal


def optimal_success(
    desc, slippery: bool, gamma: float = 0.99, horizon: int = 200, rewards=(1.0, -1.0, 0.0)
) -> dict:
    """Success within `horizon` steps of the greedy policy of Q* (value iteration).

    Returns {'greedy_success': P(reach G within horizon | greedy on Q*, ties to the
    lowest action as distrl's argmax), 'best_success': the highest such probability
    any policy can reach (finite-horizon DP), 'v_start': V*(S)}.
    """
    p, r, terminal = transition_model(desc, slippery, rewards)
    expected_r = np.einsum("ijk,ijk->ij", p, r)  # [S, A]
    v = np.zeros(len(terminal))
    for _ in range(10_000):
        q = expected_r + gamma * p @ v  # [S, A]
        q[terminal] = 0.0
        new_v = q.max(axis=1)
        if np.max(np.abs(new_v - v)) < 1e-12:
            break
        v = new_v
    policy = q.argmax(axis=1)
    goal = np.array([ch == "G" for ch in "".join(desc)])
    start = "".join(desc).index("S")
    p_pi = p[np.arange(len(policy)), policy]  # [S, S]
    dist = np.zeros(len(policy))
    dist[start] = 1.0
    for _ in range(horizon):
        dist = dist @ p_pi
    best = goal.astype(float)  # P(reach G within k steps) maximised, k = 0..horizon
    for _ in range(horizon):
        best = np.where(terminal, goal.astype(float), (p @ best).max(axis=1))
    return {
        "greedy_success": float(dist[goal].sum()),
        "best_success": float(best[start]),
        "v_start": float(v[start]),
    }


def distributed(
    algo: str,
    num_actors: int,
    run_dir: str,
    cap_s: float,
    overrides: dict | None = None,
    launch_type: str = "local_mp",
) -> dict:
    """launch/train.py to its exit: wall, whether the target was reached, env steps.

    `launch_type` test_mt runs the same program with every node a thread of one
    process: the comparison that isolates what starting a process per node costs.
    """
    flags = {
        "num_actors": num_actors,
        "run_dir": run_dir,
        "budget.seconds": cap_s,
        "budget.env_steps": 0,
        **(overrides or {}),
    }
    cmd = [
        sys.executable,
        str(ROOT / "launch" / "train.py"),
        f"--config=configs/{algo}.py",
        f"--lp_launch_type={launch_type}",
        *override_flags(flags),
    ]
    os.makedirs(os.path.dirname(run_dir), exist_ok=True)
    first_eval, result_path = (
        os.path.join(run_dir, *_FIRST_EVAL),
        os.path.join(run_dir, "result.json"),
    )
    proc = run_subprocess(
        cmd, timeout=cap_s + 90, log_path=run_dir + ".log", watch=[first_eval, result_path]
    )
    result = read_json(result_path) or {}
    counts = result.get("counts", {})
    return {
        "wall": proc["wall"],
        "rc": proc["rc"],
        "timed_out": proc["timed_out"],
        # When the program was up (the evaluator's first log row, if distrl writes
        # one) and when the verdict was written; wall - result_at is the shutdown.
        "up_at": proc["seen"].get(first_eval),
        "result_at": proc["seen"].get(result_path),
        "reached": result.get("stop_reason") == "target_reached",
        "stop_reason": result.get("stop_reason"),
        "env_steps": counts.get("env_steps"),
        "learner_steps": counts.get("learner_steps"),
        "success_rate": (result.get("evaluation") or {}).get("success_rate"),
        "evaluator_wall": result.get("wall_seconds"),  # run start -> the evaluator's verdict
        "log": proc["log"],
    }


def local(algo: str, log_path: str, cap_s: float) -> dict:
    """The single-process trainer to its exit: process wall, in-process wall, env steps."""
    proc = run_subprocess(
        python_cmd("benchmarks.solve", "local", f"--algo={algo}"), timeout=cap_s, log_path=log_path
    )
    out = {"wall": proc["wall"], "rc": proc["rc"], "timed_out": proc["timed_out"], "log": log_path}
    with open(log_path) as f:
        lines = [line for line in f if line.startswith("{")]
    if lines:
        out.update(json.loads(lines[-1]))
    return out


def _local_main(algo: str) -> None:
    """Child of `local`: trains configs/<algo>.py single-process and prints one JSON line."""
    from benchmarks.common import load_config
    from distrl import local as local_lib

    result = local_lib.train(load_config(algo))
    print(
        json.dumps(
            {
                "reached": bool(result.solved),
                "env_steps": int(result.env_steps),
                "updates": int(result.updates),
                "train_wall": float(result.wall_time),
                "compile": float(result.compile_time),
                "success_rate": float(result.success_rate),
            }
        ),
        flush=True,
    )


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["local", "optimal"])
    parser.add_argument("--algo", default="dqn")
    parser.add_argument("--map", default="8x8")
    args = parser.parse_args(argv)
    if args.what == "local":
        _local_main(args.algo)
    else:
        from distrl.envs import MAPS

        print(optimal_success(MAPS[args.map], slippery=True))


if __name__ == "__main__":
    main()
