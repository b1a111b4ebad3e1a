"""Stage 7 of the data flow, the launcher: prepare, launch, wait, outcome.

`run` validates the config (and, when resuming, the checkpoint), locks and
prepares the run directory (`distrl.records.rundir`: one live program per directory),
launches `topology.make_program(config)` under `local_mp` (a supervised process
per node, `distrl.program.supervisor`: output in the run directory, one progress
line in the terminal, restarts as the config allows), on a Ray cluster
(`distrl.program.ray.cluster`) or under `test_mt` (a thread per node, for tests),
waits for every node to exit, draws the plots and returns the evaluator's
`result.json`.
"""

import contextlib
import functools
import os
import shutil
import sys
import time

import launchpad as lp
from absl import logging

from distrl import checkpoints, metrics, resources
from distrl import config as config_lib
from distrl import experiment as experiment_lib
from distrl.nodes import counter
from distrl.program import nodeenv, ports, scaling, staging, supervisor
from distrl.program.errors import NodeFailure
from distrl.program.topology import make_program
from distrl.records import failures, results, rundir


def node_envs(run_dir: str | None = None, learner_device: str = "auto") -> dict:
    """Environment variables of each group's node processes; with `run_dir`, temp files go
    there; the learner's JAX platform is `learner_device` (config.learner.device)."""
    tmp_dir = os.path.join(run_dir, rundir.TMP_DIR) if run_dir else None
    return nodeenv.node_envs(tmp_dir, learner_device)


def prepare(
    config,
    resume: bool,
    stack: contextlib.ExitStack,
    launch_type: str = "local_mp",
    actors: int | None = None,
):
    """Checks everything, locks the run directory for `stack`'s life and writes
    config.json; returns (experiment, run_dir, restored manifest | None). `actors`: the count to
    launch with instead of config.num_actors (a Ray run that follows the cluster).

    Raises ConfigError (CheckpointError for a bad checkpoint, a RunDirBusy for a
    run directory another launch holds) before any node starts and before
    anything is written but the lock file: the config, this machine's memory for
    it (local launches; a Ray cluster's machines are not known here), the run
    directory, and when resuming the saved config and checkpoint.
    """
    experiment = experiment_lib.make(config)
    warning = None if launch_type == "ray" else resources.check_memory(experiment)
    run_dir = rundir.resolve(config)
    rundir.check_writable(run_dir)
    stack.enter_context(rundir.locked(run_dir))
    if resume:
        rundir.check_resume(config, run_dir)
    else:
        rundir.check_fresh(run_dir)
    warning = _actor_count(config, run_dir, resume, launch_type, actors) or warning
    restored = _checkpoints_to_resume(run_dir, experiment) if resume else None
    if warning:
        _say(warning)
    _start_outputs(config, run_dir)
    return experiment, run_dir, restored


def _actor_count(config, run_dir: str, resume: bool, launch_type: str, actors) -> str | None:
    """Sets config.num_actors to the count to launch with: `actors` when given, else
    on a resume the count the run was scaled to (`_scaled_count`). Returns the memory
    warning for a changed count, if any."""
    if actors is None:
        return _scaled_count(config, run_dir, launch_type) if resume else None
    _say(f"{actors} actors: the Ray cluster's actor slots now (config.ray.actors=auto)")
    config.num_actors = actors
    return None


def _scaled_count(config, run_dir: str, launch_type: str) -> str | None:
    """A resumed run starts with the actor count it last ran with (actors.log, when
    `launch/scale.py` changed it), checked as a scale request is; config.json then
    records it. Returns the memory warning for that count, if any."""
    count = scaling.current_count(run_dir)
    if count is None or count == config.num_actors:
        return None
    warning = scaling.check_count(config, count, local=launch_type != "ray")
    _say(f"resuming with {count} actors, the count the run was scaled to ({scaling.LOG_FILE})")
    config.num_actors = count
    return warning


def _start_outputs(config, run_dir: str) -> None:
    """config.json as this launch runs it; no earlier launch's outcome or failures,
    which a resumed run must not report."""
    rundir.remove_dead_launches(run_dir)
    rundir.write_config(config, run_dir)
    shutil.rmtree(os.path.join(run_dir, failures.FAILURES_DIR), ignore_errors=True)
    results.remove(run_dir)


def _checkpoints_to_resume(run_dir: str, experiment) -> dict:
    """The learner manifest to resume from, with "replay_checkpoint": the replay
    checkpoint to load (None: an empty table). The learner's is the newest usable;
    the replay's the newest usable not newer than it (`checkpoints.pairs.select`);
    each one skipped, and the pair chosen, are said on stderr."""
    config = experiment.config
    restored = checkpoints.learner.verify(run_dir, config.algorithm, experiment.agent)
    for why in restored.get("skipped", []):
        _say(f"learner checkpoint skipped: {why}")
    _continue_counts(run_dir, restored)
    restored["replay_checkpoint"] = None
    if not config.checkpoint.replay:
        _say(
            f"resuming from learner checkpoint {restored['state_file']} (version "
            f"{restored['version']}) with an empty replay: checkpoint.replay is off"
        )
        return restored
    path, skipped = checkpoints.pairs.select(run_dir, restored["state_file"])
    for why in skipped:
        _say(f"replay checkpoint skipped: {why}")
    _say(checkpoints.pairs.pairing(restored, path, skipped))
    checkpoints.replay.adopt(run_dir)
    if path is not None:  # where adopt moved it
        path = os.path.join(checkpoints.replay.kept_dir(run_dir), os.path.basename(path))
    restored["replay_checkpoint"] = path
    return restored


def _continue_counts(run_dir: str, restored: dict) -> None:
    """Counts never go back on resume: the run continues from the counter's own
    record (`counter.resumed_counts`) when it is ahead of the checkpoint's (a kill
    long after the last checkpoint), and so does the run clock, and says so."""
    checkpointed = restored.get("counts", {})
    restored["counts"] = counter.resumed_counts(checkpointed, counter.state_file(run_dir))
    ahead = [
        f"{name} {checkpointed.get(name, 0):.0f} -> {restored['counts'][name]:.0f}"
        for name in ("env_steps", "episodes", "param_version")
        if restored["counts"].get(name, 0) > checkpointed.get(name, 0)
    ]
    stopped_at = _run_seconds_at_stop(run_dir)
    if stopped_at > restored["elapsed_seconds"]:
        ahead.append(f"run clock {restored['elapsed_seconds']:.0f} -> {stopped_at:.0f} s")
        restored["elapsed_seconds"] = stopped_at
    if ahead:
        _say(
            f"counts continue from {counter.state_file(run_dir)}, ahead of the "
            f"checkpoint's: {', '.join(ahead)}"
        )


def _run_seconds_at_stop(run_dir: str) -> float:
    """The run clock when the run last stopped, 0.0 when unknown: its start comes from
    the evaluator's last row (Unix `time` less `elapsed`), its stop from the counter's
    file, which every count changes (a kill long after the checkpoint included), so
    the clock of a resumed run goes on from there instead of the checkpoint's."""
    row = metrics.last_row(metrics.csv_path(run_dir, "evaluator"))
    try:
        stopped = os.path.getmtime(counter.state_file(run_dir))
    except OSError:
        return 0.0
    if "time" not in row or "elapsed" not in row:
        return 0.0
    return max(stopped - (row["time"] - row["elapsed"]), 0.0)


def _say(text: str) -> None:
    print(f"distrl: {text}", file=sys.stderr, flush=True)


def run(
    config,
    launch_type: str = "local_mp",
    terminal: str = "output_to_files",
    resume: bool = False,
    progress_stream=None,
    ray_address: str = "auto",
):
    """Validates, launches and waits for the program; returns (result dict | None, run_dir).

    `terminal` (local_mp): "output_to_files" keeps each node's output in
    `<run_dir>/logs/nodes/` and draws one progress line on `progress_stream`
    (default stdout); "current_terminal" prints every node's output here (for
    debugging). `resume` continues the run in `config.run_dir` from its last
    checkpoint. The result is None when the program ended without the evaluator
    writing one. Raises ConfigError before anything starts when the config, or
    the checkpoint to resume, cannot work. Plots are drawn into `<run_dir>/plots/`
    (none with $DISTRL_PLOTS=off).
    Under launch type "ray" the nodes run on the Ray cluster at `ray_address`
    (`distrl.program.ray.cluster`; "auto": the cluster this machine belongs to).
    """
    if launch_type not in config_lib.LAUNCH_TYPES:
        raise config_lib.ConfigError(
            f"launch type {launch_type!r} is unknown; valid: {config_lib.LAUNCH_TYPES}"
        )
    with contextlib.ExitStack() as stack:
        if launch_type == "ray":
            from distrl.program.ray import cluster  # noqa: PLC0415 - Ray only to launch on it

            experiment_lib.make(config)  # a bad config is reported before joining the cluster
            # A resume takes the count the run was scaled to (`_scaled_count`): checked too.
            scaled = scaling.current_count(rundir.resolve(config)) if resume else None
            stack.enter_context(cluster.connected(ray_address, config, scaled))
            actors = cluster.launch_count(config)
            run_dir, program = _build(config, resume, stack, launch_type, actors)
            restarts = cluster.run(
                program,
                config,
                run_dir,
                node_envs(run_dir, config.learner.device),
                progress_stream or sys.stdout,
            )
            return _outcome(run_dir, restarts)
        run_dir, program = _build(config, resume, stack, launch_type)
        if launch_type == "test_mt":
            # Launchpad binds each node itself here: bound as local_mp's are (`ports`),
            # its servers keep out of the ephemeral range other sockets take ports from.
            claims = ports.Claims()
            stack.callback(claims.release)
            for node in program.get_all_nodes():
                node.bind_addresses = functools.partial(staging.bind_local, node, claims)
            lp.launch(program, launch_type="test_mt", serialize_py_nodes=False).wait()
            return _outcome(run_dir, [])
        restarts = supervisor.run(
            program,
            config,
            run_dir,
            node_envs(run_dir, config.learner.device),
            progress_stream or sys.stdout,
            terminal,
        )
        return _outcome(run_dir, restarts)


def _build(config, resume: bool, stack, launch_type: str, actors: int | None = None):
    """(run_dir, program): the locked, prepared run directory and the program to launch in it."""
    experiment, run_dir, restored = prepare(config, resume, stack, launch_type, actors)
    start_time = time.time() - (restored["elapsed_seconds"] if restored else 0.0)
    return run_dir, make_program(experiment, run_dir, start_time, restored)


def _outcome(run_dir: str, restarts: list):
    """(result | None, run_dir) after the program ended; NodeFailure if a node failed.

    The restarts made, the failures that ended the run and the learner's last
    checkpoint go into result.json too.
    """
    reports = failures.read_failures(run_dir)
    results.add(
        run_dir,
        restarts=restarts,
        failures={name: failures.summary(t) for name, t in reports.items()},
        learner_checkpoint=checkpoints.learner.on_disk(run_dir),  # written as the learner stopped
    )
    if reports:
        raise NodeFailure(reports, run_dir)
    result = results.read(run_dir)
    if result is None:
        return None, run_dir
    try:
        if rundir.plots_at_the_end():
            # matplotlib is 0.6 s of the launcher's start: imported only for the plot
            from distrl.analysis import plots  # noqa: PLC0415

            plots.plot_run(run_dir)
    except Exception as err:  # noqa: BLE001 - a plot must not lose a finished run's result
        logging.warning("plots of %s failed: %s", run_dir, err)
    return result, run_dir
