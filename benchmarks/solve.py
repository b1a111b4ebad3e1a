"""Time to solve: wall time from a command's start to its exit once the target is met.

- `distributed`: `launch/train.py` under local_mp as a subprocess with N actors; the
  evaluator stops the program at `evaluator.target_success`; wall = Popen to exit.
  Env steps and the stop reason come from the run's result.json. Its start-up (each
  node's first log row: an actor's comes after its first rollout, the learner's
  within 0.1 s of its first update, the evaluator's after its first evaluation) and
  the memory of every process of the run 1 s after the first evaluation.
- `optimal_success`: the exact optimum of a map (`distrl.envs.exact`): pi*'s
  success within the time limit, the best any policy reaches, V*(S).

    python -m benchmarks.solve                               # configs/dqn_slippery8x8.py's
    python -m benchmarks.solve --algo=ppo --config.env.map=8x8 --config.env.slippery=True

`main` prints the optimum of a config's map at its discount: `--algo=<name>`
(configs/<name>.py), fields overridden as launch/train.py takes them
(`--config.<section>.<field>=<value>`).
"""

import os
import sys

from absl import flags

from benchmarks.common import ROOT, configs_of, load_config, read_json, run_subprocess
from benchmarks.monitor import session_memory
from benchmarks.report import fmt
from distrl import cli
from distrl.envs import exact, make_env

_FIRST_EVAL = ("logs", "evaluator.csv")  # written at the evaluator's first evaluation
_MEMORY_AFTER_S = 1.0  # after the first evaluation: every node is up and stepping


def distributed(algo: str, num_actors: int, run_dir: str, cap_s: float, overrides=None) -> dict:
    """launch/train.py to its exit: wall, whether the target was reached, env steps,
    when the evaluator's first log row appeared (`up_at`: the command to the first
    evaluation) and a one-line `summary` for the table."""
    settings = {
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
        "--lp_launch_type=local_mp",
        *cli.override_flags(settings),
    ]
    os.makedirs(os.path.dirname(run_dir), exist_ok=True)
    first_eval, result_path = (
        os.path.join(run_dir, *_FIRST_EVAL),
        os.path.join(run_dir, "result.json"),
    )
    first_rows = {
        node: os.path.join(run_dir, "logs", f"{node}.csv")
        for node in ["learner", *(f"actor_{i}" for i in range(num_actors))]
    }
    memory = {}

    def take_memory(seen, elapsed, pid):
        if not memory and first_eval in seen and elapsed > seen[first_eval] + _MEMORY_AFTER_S:
            memory.update(session_memory(pid, os.path.join(run_dir, "logs", "nodes")) or {"": {}})

    proc = run_subprocess(
        cmd,
        timeout=cap_s + 90,
        log_path=run_dir + ".log",
        watch=[first_eval, result_path, *first_rows.values()],
        on_poll=take_memory,
    )
    result = read_json(result_path) or {}
    counts = result.get("counts", {})
    out = {
        "wall": proc["wall"],
        "rc": proc["rc"],
        "timed_out": proc["timed_out"],
        "up_at": proc["seen"].get(first_eval),  # the program is up: its first evaluation
        "result_at": proc["seen"].get(result_path),  # the verdict; wall - result_at: exit
        "reached": result.get("stop_reason") == "target_reached",
        "stop_reason": result.get("stop_reason"),
        "env_steps": counts.get("env_steps"),
        "learner_steps": counts.get("learner_steps"),
        "success_rate": (result.get("evaluation") or {}).get("success_rate"),
        # the final greedy policy's exact success over pi*'s (result.json's "exact")
        "exact_ratio": (result.get("exact") or {}).get("ratio"),
        "log": proc["log"],
        "first_rows": {node: proc["seen"].get(path) for node, path in first_rows.items()},
        "memory": _memory_summary(memory),
    }
    steps = [*out["first_rows"].values(), out["up_at"]]
    out["every_node"] = None if None in steps else max(steps)
    return dict(out, summary=_summary(out))


def _memory_summary(memory: dict) -> dict:
    """{process: figures} plus 'total' (sums) and 'pss_line' (each process's PSS)."""
    memory = {name: m for name, m in memory.items() if m}
    if not memory:
        return {}
    total = {k: sum(m[k] for m in memory.values()) for k in next(iter(memory.values()))}
    line = ", ".join(f"{name} {m['pss_gb']:.2f}" for name, m in sorted(memory.items()))
    return dict(memory, total=dict(total, count=len(memory)), pss_line=line)


def _summary(s: dict) -> str:
    """Where the wall time went, and why a run that did not reach its target stopped."""
    text = f"{fmt(s['env_steps'])} env steps; first evaluation at {fmt(s['up_at'], 's')}"
    if s["result_at"] is not None:
        exit_s = s["wall"] - s["result_at"]
        text += f", verdict at {fmt(s['result_at'], 's')}, exit {fmt(exit_s, 's')} later"
    if s["reached"]:
        return text
    return (
        f"not reached in {fmt(s['wall'], 's')} (stop: {s['stop_reason']}, "
        f"success {fmt(s['success_rate'])}); {text}"
    )


def optimal_success(map_name: str, slippery: bool = True, discount: float = 0.99) -> dict:
    """The exact optimum of a named map (`distrl.envs.exact`): pi*'s success within the
    time limit (`greedy_success`), the best any policy reaches, and V*(S)."""
    env = make_env(map_name, slippery=slippery)
    best = exact.optimum(env, discount)
    s = env.start_cell
    return {
        "greedy_success": float(best.success[s]),
        "best_success": float(best.max_success[s]),
        "v_start": float(best.value[s]),
    }


def main(argv=None) -> None:
    args = flags.FlagValues()
    flags.DEFINE_string(
        "algo", "dqn_slippery8x8", "Config whose map's optimum to print.", flag_values=args
    )
    argv = [sys.argv[0], *(sys.argv[1:] if argv is None else argv)]
    overrides = cli.parse_several(args, argv, lambda a: configs_of([a.algo]), usage=__doc__)
    config = load_config(args.algo, overrides.of(args.algo))
    print(optimal_success(config.env.map, config.env.slippery, config.agent.discount))


if __name__ == "__main__":
    main()
