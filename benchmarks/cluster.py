"""Env steps/s of one program under `local_mp` and on a local multi-node Ray cluster.

    .venv/bin/python benchmarks/cluster.py [--algo=ppo] [--actors=2,4] [--seconds=40] \
        [--config.actor.num_envs=128]

Starts the cluster the cluster tests use (a head with no CPUs holding the replay, a
2-CPU worker holding the learner, a second 2-CPU worker, each worker its own network
host in a namespace when run as root; actors spread over both workers), then runs
the same config for the same wall-clock budget under each launch type and actor
count, interleaved, in this one process: `local_mp` with N actors, then Ray with N
actors, for each N. Every run has no target (it runs its whole budget), so the rates
compare like with like.

Printed per run: start-up (seconds until the evaluator first saw env steps), steady
env steps/s and updates/s (evaluator rows after start-up: last minus first over the
time between them), and the ratio of Ray's steady rate to local_mp's at the same
actor count. All processes share this machine's cores: the cluster here measures
the launcher's overhead and the cost of network addresses, not extra hardware.

`--algo=<name>` runs configs/<name>.py; `--config.<section>.<field>=<value>` overrides
a field of it in every run (after this benchmark's own settings: actors, budget,
run directory), checked before the cluster starts.
"""

import csv
import json
import os
import subprocess
import sys
import time

if __package__ in (None, ""):  # `python benchmarks/cluster.py`: make `benchmarks` importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from absl import flags

from benchmarks.common import QUIET_ENV, ROOT, algo_overrides
from distrl import cli

TRAIN = [sys.executable, str(ROOT / "launch" / "train.py")]
PLACE = ["--config.ray.replay_resource=replay_host", "--config.ray.learner_resource=learner_host"]


HEAD = {"num_cpus": 0, "resources": {"replay_host": 1}}
WORKERS = [{"num_cpus": 2, "resources": {"learner_host": 1}}, {"num_cpus": 2}]


def start_cluster():
    """(cluster, what it is): the cluster of tests/test_cluster.py, each worker its own
    network host when this machine allows it, else Ray's cluster_utils on one address."""
    sys.path.insert(0, str(ROOT / "tests"))
    import netns_cluster  # the tests' helper

    if netns_cluster.available():
        return netns_cluster.NetnsRayCluster(HEAD, WORKERS).start(), "network namespaces"
    from ray.cluster_utils import Cluster  # only this benchmark needs Ray

    c = Cluster(initialize_head=True, head_node_args={**HEAD, "include_dashboard": False})
    for worker in WORKERS:
        c.add_node(**worker)
    c.wait_for_nodes()
    return c, "one address (cluster_utils)"


def steady_rates(run_dir: str) -> dict:
    """Start-up and steady env steps/s, updates/s from the evaluator's rows."""
    with open(os.path.join(run_dir, "logs", "evaluator.csv")) as f:
        rows = [{k: float(v) for k, v in row.items()} for row in csv.DictReader(f)]
    going = [r for r in rows if r["env_steps"] > 0]
    first, last = going[0], going[-1]
    span = last["elapsed"] - first["elapsed"]
    return {
        "startup_s": first["elapsed"],
        "env_steps_per_s": (last["env_steps"] - first["env_steps"]) / span,
        "updates_per_s": (last["learner_steps"] - first["learner_steps"]) / span,
        "rows": len(going),
    }


def run_once(
    config: str, launch: str, actors: int, seconds: float, address: str, out: str, overrides=None
):
    run_dir = os.path.join(out, f"{config}-{launch}-{actors}")
    args = [
        f"--config=configs/{config}.py",
        f"--lp_launch_type={launch}",
        f"--config.num_actors={actors}",
        f"--config.run_dir={run_dir}",
        "--config.evaluator.target_success=0",
        "--config.budget.env_steps=0",
        f"--config.budget.seconds={seconds}",
        *cli.override_flags(overrides or {}),
    ]
    if launch == "ray":
        args += [f"--ray_address={address}", *PLACE]
    start = time.time()
    done = subprocess.run(
        TRAIN + args,
        cwd=ROOT,
        env={**os.environ, **QUIET_ENV},
        capture_output=True,
        text=True,
        timeout=seconds + 300,
        check=False,
    )
    wall = time.time() - start
    if done.returncode != 0:
        raise RuntimeError(
            f"{launch} x{actors} exited {done.returncode}:\n{done.stdout[-3000:]}"
            f"{done.stderr[-3000:]}"
        )
    where = {}
    placement = os.path.join(run_dir, "placement.json")
    if os.path.exists(placement):
        with open(placement) as f:
            where = json.load(f)
    nodes = len({w["ray_node"] for name, w in where.items() if name.startswith("actor/")})
    return dict(
        launch=launch, actors=actors, wall_s=wall, actor_ray_nodes=nodes, **steady_rates(run_dir)
    )


def _flags():
    values = flags.FlagValues()
    flags.DEFINE_string("algo", "ppo", "Config to run (configs/<algo>.py).", flag_values=values)
    flags.DEFINE_string("actors", "2,4", "Actor counts, comma-separated.", flag_values=values)
    flags.DEFINE_float("seconds", 40.0, "Wall-time budget per run.", flag_values=values)
    flags.DEFINE_string(
        "out",
        str(ROOT / "runs" / f"bench-cluster-{int(time.time())}"),
        "Where the runs' directories are kept.",
        flag_values=values,
    )
    return values


def main(argv=None) -> None:
    args = _flags()
    argv = [sys.argv[0], *(sys.argv[1:] if argv is None else argv)]
    overrides = algo_overrides(args, argv, __doc__)
    cluster, kind = start_cluster()
    rows = []
    try:
        for actors in (int(a) for a in args.actors.split(",")):
            for launch in ("local_mp", "ray"):
                rows.append(
                    run_once(
                        args.algo,
                        launch,
                        actors,
                        args.seconds,
                        cluster.address,
                        args.out,
                        overrides,
                    )
                )
                print(json.dumps(rows[-1]), flush=True)
    finally:
        cluster.shutdown()
    local = {r["actors"]: r["env_steps_per_s"] for r in rows if r["launch"] == "local_mp"}
    print(
        f"\n{args.algo}, {args.seconds:.0f} s budget per run, one machine "
        f"({os.cpu_count()} cores); Ray: 3 Ray nodes ({kind}), actors on 2"
    )
    print(
        "| launch | actors | actor Ray nodes | start-up s | env steps/s | updates/s "
        "| vs local_mp | wall s |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        ratio = r["env_steps_per_s"] / local[r["actors"]]
        nodes = r["actor_ray_nodes"] if r["launch"] == "ray" else "-"
        print(
            f"| {r['launch']} | {r['actors']} | {nodes} | {r['startup_s']:.1f} "
            f"| {r['env_steps_per_s']:,.0f} | {r['updates_per_s']:.1f} | {ratio:.2f}x "
            f"| {r['wall_s']:.1f} |"
        )


if __name__ == "__main__":
    main()
