"""The system's stages under local_mp: the real Actor alone, the real Learner alone,
and the whole program, each measured from counter and Reverb-table snapshots.

Each measurement is one Launchpad program, run as distrl's launcher runs its own
(`distrl.program.beside`: the supervisor, each node a fork of the preloaded parent),
by `python -m benchmarks.stages` in a subprocess of its own session (so that every
node it starts can be killed):
- `--mode=stage`: replay (an unlimited table, `benchmarks.tables`), counter,
  `FixedParams`, one real Actor (`StageActor`) and the real Learner held at a gate
  (`GatedLearner`). Phase 1 times the actor alone; then the actor is stopped and the
  learner released, and phase 2 times the learner on the table the actor filled.
- `--mode=e2e`: `distrl.program.topology.make_program(config)` itself, unchanged.
In both, a `benchmarks.monitor.Monitor` in the launcher process waits until the
counts move, waits `warmup` seconds more (compilation, first params), records
snapshots over `window` seconds, and then stops the program. Rates come from those
snapshots only, so startup and shutdown are not in them. The e2e program also gives
its start-up (when each count and each node's first log row were first seen, from
this command's start) and, at the window's end, each node process's memory (with
LAUNCHPAD_LOGGING_DIR set, which names each node's output file). `summarize_*` turn
these into the figures of the table.

    python -m benchmarks.stages --mode=stage --algo=dqn,ppo --run-dir=/tmp/st \
        [--config.actor.num_envs=256] [--dqn.replay.item_steps=4]

Config overrides as in `benchmarks/run.py`: `--config.<field>=<value>` for every
algorithm, `--dqn.<field>=<value>` / `--ppo.<field>=<value>` for one.
"""

import datetime
import functools
import os
import sys
import time

import launchpad as lp
from absl import flags

from benchmarks import nodes, tables
from benchmarks.common import (
    configs_of,
    delta,
    load_config,
    rate_between_changes,
    write_json,
)
from benchmarks.monitor import Monitor, node_memory
from distrl import cli, metrics
from distrl import config as config_lib
from distrl import experiment as experiment_lib
from distrl.nodes.actor import Actor
from distrl.nodes.counter import Counter
from distrl.nodes.learner import Learner
from distrl.program import beside, launcher, topology
from distrl.program.lifecycle import LAUNCHPAD


def stage_program(configs, run_dir: str, warmup: float, window: float, actors_only=()):
    """Each algorithm's actor alone, then its learner alone (see module doc).

    `configs` maps an algorithm (or preset) name to its config; the names in
    `actors_only` (the env presets' rows: configs/ppo_cartpole.py, ...) time their
    actor alone, with no learner phase. Returns (program, counter handle,
    replay handles by algorithm, monitor plan). One program serves every algorithm,
    so the startup of a Launchpad program is paid once: each algorithm has its own
    Reverb server, params server, actor and learner, started and stopped in turn
    by gate files; the counter and the params servers share one process.
    """
    p = lp.Program("distrl-stages")
    counter_node = lp.CourierNode(Counter)
    counter = counter_node.create_handle()
    colocated, replays, plan = [counter_node], {}, []
    for algo, config in configs.items():
        with p.group("replay"):
            replays[algo] = p.add_node(
                lp.ReverbNode(functools.partial(tables.unlimited_tables, config))
            )
        params_node = lp.CourierNode(nodes.FixedParams, config)
        colocated.append(params_node)
        node_dir = os.path.join(run_dir, algo)  # each learner's own checkpoints and logs
        known = {
            "experiment": experiment_lib.Experiment(config),
            "actor_id": 0,
            "replay_client": replays[algo],
            "learner": params_node.create_handle(),
            "counter": counter,
            "run_dir": node_dir,
            "start_time": time.time(),
            "lifecycle": LAUNCHPAD,  # Launchpad's stop; each body ends its process
        }
        # Each stage node: the real node class behind a gate, and the plan entry that
        # opens the gate, times the counter it drives, and closes it again.
        roles = (
            ("actor", nodes.StageActor, Actor, "env_steps"),
            ("learner", nodes.StageLearner, Learner, "learner_steps"),
        )
        for role, stage_node, real_node, counter_key in roles[: 1 if algo in actors_only else 2]:
            gate = f"{algo}-{role}"
            with p.group(role):
                p.add_node(
                    lp.CourierNode(
                        stage_node,
                        gate_dir=run_dir,
                        gate=gate,
                        **nodes.node_kwargs(real_node, **known),
                    )
                )
            plan.append(
                {
                    "name": gate,
                    "replay": algo,
                    "touch": gate + nodes.GO,
                    # the shared counter's key and, for an actor, its own table's
                    # inserts: another phase's counts never start this one's window
                    "wait_for": [counter_key] + (["table_inserts"] if role == "actor" else []),
                    # a learner compiles its update after the gate opens: on a loaded
                    # machine (tests beside other jobs) a recurrent one can take over 120 s;
                    # the first phase also waits for every node process to start
                    "timeout": 300 if role == "learner" or not plan else 120,
                    "warmup": warmup,
                    "window": window,
                    "after": gate + nodes.STOP,
                    "then_quiet": counter_key,
                }
            )
    with p.group("counter"):
        p.add_node(lp.MultiThreadingColocation(colocated))
    return p, counter, replays, plan


def e2e_program(config, run_dir: str, warmup: float, window: float):
    """distrl's own program (`make_program`), timed over one window once it runs; each
    actor's and the evaluator's first log row are watched (the actor writes its first
    row after its first rollout, the evaluator after its first evaluation)."""
    p = topology.make_program(experiment_lib.make(config), run_dir, time.time())
    counter = p.groups["counter"][0].create_handle()
    replays = {"main": p.groups["replay"][0].create_handle()}
    logged = [f"actor_{i}" for i in range(config.num_actors)] + ["evaluator"]
    plan = [
        {
            "name": "e2e",
            "replay": "main",
            "wait_for": ["env_steps", "learner_steps"],
            "warmup": warmup,
            "window": window,
            "watch": {node: metrics.csv_path(run_dir, node) for node in logged},
        }
    ]
    return p, counter, replays, plan


def launch_and_measure(
    p, counter, replays, plan, run_dir: str, out_path: str, monitor_cls=Monitor
) -> dict:
    """Runs a program as distrl's launcher runs it under local_mp (its supervisor: a
    fork of the preloaded parent per node, distrl's per-group process settings), times
    it from this (the launcher) process, writes the snapshots and the nodes' memory
    (and returns them), then stops the program. With LAUNCHPAD_LOGGING_DIR set, each
    node's output goes to a file there, by which `node_memory` knows the node."""
    counter.set_client_kwargs(call_timeout=datetime.timedelta(seconds=3))
    log_dir = os.environ.get("LAUNCHPAD_LOGGING_DIR")

    def measure() -> dict:
        measured = monitor_cls(counter, replays, run_dir, log_dir=log_dir or "").run(plan)
        measured["memory"] = node_memory(log_dir) if log_dir else {}
        write_json(out_path, measured)
        return measured

    envs = launcher.node_envs()
    envs = {group: envs.get(group, {}) for group in p.groups}
    return beside.run(p, run_dir, envs, measure, output_dir=log_dir)


def summarize_actor(phase, config) -> dict:
    """Env steps/s, items/s and transitions/s into Reverb, share of time blocked."""
    snaps = phase["snapshots"]
    times = [s["time"] for s in snaps]
    span = times[-1] - times[0]
    items = delta(snaps, "table_inserts") / span
    per_item = experiment_lib.Experiment(config).pipeline.transitions_per_item(config)
    return {
        "env_steps_per_s": rate_between_changes(times, [s.get("env_steps", 0) for s in snaps]),
        "items_per_s": items,
        "transitions_to_reverb_per_s": items * per_item,
        "blocked_share": _share(times, snaps, "actor_blocked_seconds"),
        **cpu_figures(phase),
    }


def summarize_learner(phase, config=None) -> dict:
    """Updates/s, samples (transitions)/s, share of time waiting for data."""
    snaps = phase["snapshots"]
    times = [s["time"] for s in snaps]
    return {
        "updates_per_s": rate_between_changes(times, [s.get("learner_steps", 0) for s in snaps]),
        "samples_per_s": rate_between_changes(times, [s.get("learner_samples", 0) for s in snaps]),
        "wait_share": _share(times, snaps, "learner_wait_seconds"),
        "busy_share": _share(times, snaps, "learner_busy_seconds"),
        **cpu_figures(phase),
    }


def summarize_e2e(phase, config) -> dict:
    """The learner's and actors' figures plus samples per insert, version lag and data age."""
    snaps = phase["snapshots"]
    times = [s["time"] for s in snaps]
    out = summarize_learner(phase, config)
    out["env_steps_per_s"] = rate_between_changes(times, [s.get("env_steps", 0) for s in snaps])
    inserts = delta(snaps, "table_inserts")
    out["samples_per_insert"] = delta(snaps, "table_samples") / inserts if inserts else None
    steps = delta(snaps, "env_steps")
    out["sampled_per_env_step"] = delta(snaps, "learner_samples") / steps if steps else None
    pulls = delta(snaps, "param_updates")
    out["mean_version_lag"] = delta(snaps, "version_lag") / pulls if pulls else None
    learned = delta(snaps, "learner_items")  # data age: updates from acting to learning
    out["data_age_mean"] = delta(snaps, "data_age_sum") / learned if learned else None
    out["data_age_max"] = snaps[-1].get("data_age_max")
    blocked = _share(times, snaps, "actor_blocked_seconds")
    out["actor_blocked_share"] = blocked / config.num_actors if blocked is not None else None
    return out


def cpu_figures(phase) -> dict:
    """The window's cores per node (`Monitor`'s `cores`): 'cores' ({node: cores}),
    'cores_total' and 'cores_text' ('actor/0 0.93, replay/0 0.61, ...', busiest
    first); None where the nodes were not found. 'machine_cores': every process's on
    the machine, other work included."""
    cores = phase.get("cores") or None
    text = ", ".join(f"{n} {c:.2f}" for n, c in cores.items()) if cores else None
    total = sum(cores.values()) if cores else None
    machine = phase.get("machine_cores")
    return {"cores": cores, "cores_total": total, "cores_text": text, "machine_cores": machine}


def summarize_startup(first_seen: dict, num_actors: int) -> dict:
    """Seconds from the command to each node's first step (None where never seen):
    the replay's first insert, the counter's first env steps, the learner's first
    update, the last actor's first rollout, the evaluator's first evaluation."""
    f = first_seen
    actors = [f.get(f"actor_{i}") for i in range(num_actors)]
    out = {
        "first_insert": f.get("table_inserts"),
        "first_env_steps": f.get("env_steps"),
        "first_update": f.get("learner_steps"),
        "first_sample": f.get("table_samples"),
        "actors": None if None in actors else max(actors),
        "first_eval": f.get("evaluator"),
    }
    steps = [
        out[k] for k in ("first_insert", "first_env_steps", "first_update", "actors", "first_eval")
    ]
    out["every_node"] = None if None in steps else max(steps)
    return out


def summarize_memory(nodes: dict) -> dict:
    """{role: that node's memory (actors: the actor with the highest peak)} and 'total'
    (sums over every node process); {} when no node was found."""
    if not nodes:
        return {}
    out = {}
    for name, m in sorted(nodes.items()):
        role = name.split("/")[0]
        if role not in out or m["hwm_gb"] > out[role]["hwm_gb"]:
            out[role] = m
    out["total"] = {k: sum(m[k] for m in nodes.values()) for k in next(iter(nodes.values()))}
    out["total"]["count"] = len(nodes)
    out["nodes"] = nodes
    return out


def _share(times, snaps, key: str):
    """Seconds of `key` accumulated per second of the window (None if never reported)."""
    return rate_between_changes(times, [s.get(key, 0.0) for s in snaps])


def bench_config(
    algo: str,
    num_actors: int = 1,
    spi: float = 0.0,
    run_dir: str = "",
    extra=None,
    fixed_params: bool = False,
):
    """configs/<algo>.py for a timed run: no evaluator target, budgets only as a safety
    cap, no checkpoint inside the window; DQN at `spi` samples per insert if given;
    with `fixed_params` (the stage program's actor, served by `FixedParams`) no
    version gate; then the `extra` overrides (the command's config overrides)."""
    present = set(load_config(algo).keys())  # the config grows sections over time
    overrides = {
        "num_actors": num_actors,
        "evaluator.target_success": 0.0,
        "budget.env_steps": 0,
        "budget.seconds": 600.0,
        "run_dir": run_dir,
    }
    if "checkpoint" in present:
        overrides.update({"checkpoint.every_seconds": 0.0, "checkpoint.replay": False})
    if algo == "dqn" and spi:
        overrides["replay.samples_per_insert"] = spi
    if fixed_params:  # the params never advance: a gated actor would only wait
        overrides["actor.chunks_per_version"] = 0
    config = load_config(algo, {**overrides, **(extra or {})})
    experiment_lib.make(config)
    return config


def _flags():
    values = flags.FlagValues()
    flags.DEFINE_enum("mode", None, ["stage", "e2e"], "What to measure.", flag_values=values)
    flags.DEFINE_string(
        "algo", "dqn", "dqn | ppo | a config name (stage mode: dqn,ppo)", flag_values=values
    )
    flags.DEFINE_list(
        "actors_only", [], "stage mode: names of --algo timed without a learner", flag_values=values
    )
    flags.DEFINE_integer("actors", 1, "Actors of the program.", flag_values=values)
    flags.DEFINE_float("spi", 0.0, "DQN samples per insert (0: config's)", flag_values=values)
    flags.DEFINE_float("warmup", 2.0, "Seconds before the window.", flag_values=values)
    flags.DEFINE_float("window", 6.0, "Seconds measured.", flag_values=values)
    flags.DEFINE_string("run-dir", None, "The program's directory.", flag_values=values)
    for name in ("mode", "run-dir"):
        flags.mark_flag_as_required(name, flag_values=values)
    return values


def main(argv=None) -> None:
    args = _flags()
    argv = [sys.argv[0], *(sys.argv[1:] if argv is None else argv)]
    overrides = cli.parse_several(
        args, argv, lambda a: configs_of(a.algo.split(",")), usage=__doc__
    )
    run_dir = args["run-dir"].value
    os.makedirs(run_dir, exist_ok=True)
    try:
        configs = {
            algo: bench_config(
                algo,
                args.actors,
                args.spi,
                run_dir,
                overrides.of(algo),
                fixed_params=args.mode == "stage",
            )
            for algo in args.algo.split(",")
        }
    except config_lib.ConfigError as err:
        cli.fail(f"bad config: {err}")
    if args.mode == "stage":
        built = stage_program(configs, run_dir, args.warmup, args.window, args.actors_only)
    else:
        (config,) = configs.values()
        built = e2e_program(config, run_dir, args.warmup, args.window)
    launch_and_measure(*built, run_dir, os.path.join(run_dir, "monitor.json"))


if __name__ == "__main__":
    main()
