"""Stage 7 of the data flow, the launcher: prepare, launch, wait, outcome.

`run` validates the config (and, when resuming, the checkpoint), prepares the run
directory (`distrl.rundir`), launches `topology.make_program(config)` under
`local_mp` (a process per node, output in the run directory, one progress line in
the terminal), on a Ray cluster (`distrl.program.ray.cluster`) or under `test_mt`
(a thread per node, for tests), waits for every node to exit, draws the plots and
returns the evaluator's `result.json`. The only module that touches Launchpad's
private API (`_wait`, `_run_to_files`).
"""

import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
from typing import Optional

import launchpad as lp
from absl import logging
from launchpad.launch.run_locally import launch_local_output_to_files as output_to_files
from launchpad.nodes.python.local_multi_processing import PythonProcess

from distrl import checkpoint, resources, rundir
from distrl import config as config_lib
from distrl.analysis import plots
from distrl.program import bindhost, lifecycle, progress
from distrl.program.errors import NodeFailure
from distrl.program.topology import make_program

# CPU-side nodes share the machine's cores with each other and the learner: one
# XLA/TF thread each keeps them from oversubscribing it, and JAX_PLATFORMS=cpu keeps
# them off any accelerator, which the learner alone holds.
_CPU_NODE_ENV = {
    "JAX_PLATFORMS": "cpu",
    "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1",
    "TF_NUM_INTRAOP_THREADS": "1",
    "TF_NUM_INTEROP_THREADS": "1",
    "TF_CPP_MIN_LOG_LEVEL": "2",
}


def node_envs(run_dir: Optional[str] = None) -> dict:
    """Environment variables of each group's node processes; with `run_dir`, temp files go there."""
    tmp = {"TMPDIR": os.path.join(run_dir, rundir.TMP_DIR)} if run_dir else {}
    cpu_node = {**_CPU_NODE_ENV, **tmp}
    quiet = {"TF_CPP_MIN_LOG_LEVEL": "2", **tmp}
    return {"actor": cpu_node, "evaluator": cpu_node, "counter": cpu_node,
            "replay": quiet, "learner": quiet}


def local_resources(run_dir: Optional[str] = None):
    """Per-group process settings for `local_mp`: servers listen on loopback only."""
    loopback = bindhost.environment(bindhost.LOOPBACK)
    return {label: PythonProcess(env={**env, **loopback}) for label, env in node_envs(run_dir).items()}


def prepare(config, resume: bool, launch_type: str = "local_mp"):
    """Checks everything and writes config.json; returns (run_dir, restored manifest | None).

    Raises ConfigError (CheckpointError for a bad checkpoint) before any process
    starts and before anything is written: the config, this machine's memory for
    it (local launches; a Ray cluster's machines are not known here), the run
    directory, and when resuming the saved config and checkpoint.
    """
    config_lib.validate(config)
    warning = None if launch_type == "ray" else resources.check_memory(config)
    run_dir = rundir.resolve(config)
    rundir.check_writable(run_dir)
    restored = None
    if resume:
        rundir.check_resume(config, run_dir)
        restored = checkpoint.verify(run_dir, config)
    else:
        rundir.check_fresh(run_dir)
    if warning:
        print(f"distrl: {warning}", file=sys.stderr)
    rundir.write_config(config, run_dir)
    # A resumed run must not report an earlier launch's outcome or failures.
    shutil.rmtree(os.path.join(run_dir, lifecycle.FAILURES_DIR), ignore_errors=True)
    result_path = os.path.join(run_dir, rundir.RESULT_FILE)
    if os.path.exists(result_path):
        os.remove(result_path)
    return run_dir, restored


def run(config, launch_type: str = "local_mp", terminal: str = "output_to_files",
        resume: bool = False, progress_stream=None, ray_address: str = "auto"):
    """Validates, launches and waits for the program; returns (result dict | None, run_dir).

    `terminal` (local_mp): "output_to_files" keeps each node's output in
    `<run_dir>/logs/nodes/` and draws one progress line on `progress_stream`
    (default stdout); "current_terminal" prints every node's output here (for
    debugging). `resume` continues the run in `config.run_dir` from its last
    checkpoint. The result is None when the program ended without the evaluator
    writing one. Raises ConfigError before anything starts when the config, or
    the checkpoint to resume, cannot work. Plots are drawn into `<run_dir>/plots/`.
    Under launch type "ray" the nodes run on the Ray cluster at `ray_address`
    (`distrl.program.ray.cluster`; "auto": the cluster this machine belongs to).
    """
    if launch_type not in config_lib.LAUNCH_TYPES:
        raise config_lib.ConfigError(
            f"launch type {launch_type!r} is unknown; valid: {config_lib.LAUNCH_TYPES}"
        )
    if launch_type == "ray":
        from distrl.program.ray import cluster  # noqa: PLC0415 - Ray is imported only to launch on it

        config_lib.validate(config)  # a bad config is reported before joining the cluster
        with cluster.connected(ray_address, config):
            run_dir, program = _build(config, resume, launch_type)
            cluster.run(program, config, run_dir, node_envs(run_dir), progress_stream or sys.stdout)
        return _outcome(run_dir)
    run_dir, program = _build(config, resume, launch_type)
    if launch_type == "test_mt":
        lp.launch(program, launch_type="test_mt", serialize_py_nodes=False).wait()
    elif terminal == "output_to_files":
        _run_to_files(program, run_dir, config, progress_stream or sys.stdout)
    else:
        with _temp_files_in(run_dir):
            manager = lp.launch(program, launch_type="local_mp", terminal=terminal,
                                local_resources=local_resources(run_dir))
        _wait(manager)
    return _outcome(run_dir)


def _build(config, resume: bool, launch_type: str):
    """(run_dir, program): the prepared run directory and the program to launch in it."""
    run_dir, restored = prepare(config, resume, launch_type)
    start_time = time.time() - (restored["elapsed_seconds"] if restored else 0.0)
    return run_dir, make_program(config, run_dir, start_time, restored)


@contextlib.contextmanager
def _temp_files_in(run_dir: str):
    """Points this process's temp files at <run_dir>/tmp while launching.

    Launchpad pickles each node group into a fresh temp directory (removed when
    the launcher exits); a killed launcher would leave it in /tmp otherwise.
    """
    path = os.path.join(run_dir, rundir.TMP_DIR)
    os.makedirs(path, exist_ok=True)
    saved, tempfile.tempdir = tempfile.tempdir, path
    try:
        yield
    finally:
        tempfile.tempdir = saved


def _run_to_files(program, run_dir: str, config, stream) -> None:
    """local_mp with each node's output in <run_dir>/logs/nodes/<group>/<i>.

    Launchpad reads that directory from LAUNCHPAD_LOGGING_DIR once, when it is
    imported, so it is set on the module. Launchpad's own prints in this process
    (where logs go, the stop countdown) go to logs/nodes/launcher, so that the
    terminal shows only the progress line on `stream`.
    """
    output_dir = rundir.node_output_dir(run_dir)
    os.makedirs(output_dir, exist_ok=True)
    output_to_files._LOGGING_DIR = output_dir  # a private name: see the docstring
    with open(os.path.join(output_dir, "launcher"), "a") as log, contextlib.redirect_stdout(log):
        with _temp_files_in(run_dir):
            manager = lp.launch(program, launch_type="local_mp", terminal="output_to_files",
                                local_resources=local_resources(run_dir))
        with progress.ProgressLine(run_dir, config, stream):
            _wait(manager)


def _wait(manager) -> None:
    """Waits for a local_mp program's node processes; the launcher outlives a forced stop.

    Launchpad's launcher SIGKILLs every node still running 10 s after the stop, and
    then its own process too. A node whose main thread sits in a long native call
    (seen: a resumed learner still starting up when the evaluator, already at its
    target, stopped the program) runs no Python signal handler in time, and the
    launcher died with it (exit -9, no summary, no plots). Only the nodes are killed
    now; Launchpad names them in logs/nodes/launcher. `_kill_main_thread` is private.
    """
    manager._kill_main_thread = False
    manager.wait()


def _outcome(run_dir: str):
    """(result | None, run_dir) after the program ended; NodeFailure if a node failed."""
    failures = lifecycle.read_failures(run_dir)
    if failures:
        raise NodeFailure(failures, run_dir)
    result_path = os.path.join(run_dir, rundir.RESULT_FILE)
    if not os.path.exists(result_path):
        return None, run_dir
    with open(result_path) as f:
        result = json.load(f)
    try:
        plots.plot_run(run_dir)
    except Exception as err:  # noqa: BLE001 - a plot must not lose a finished run's result
        logging.warning("plots of %s failed: %s", run_dir, err)
    return result, run_dir
