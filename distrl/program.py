"""Stage 7 of the data flow: the Launchpad program, and running it.

The one module that knows Launchpad's API. `make_program` wires the node groups
(replay, counter, learner, actor x N, evaluator); `run` validates the config,
prepares the run directory, launches under `local_mp` (a process per node) or
`test_mt` (a thread per node, for tests), waits for every node to exit, and
returns the evaluator's `result.json`.
"""

import datetime
import functools
import json
import os
import shutil
import time

import launchpad as lp
from launchpad.nodes.python.local_multi_processing import PythonProcess

from distrl import config as config_lib
from distrl import lifecycle, replay
from distrl.actor import Actor
from distrl.counter import Counter
from distrl.evaluator import Evaluator
from distrl.learner import Learner

_RPC_TIMEOUT = datetime.timedelta(seconds=3)

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


class NodeFailure(RuntimeError):
    """One or more nodes raised; the program was stopped. Maps node name -> traceback."""

    def __init__(self, failures, run_dir: str):
        self.failures = failures
        names = ", ".join(failures)
        last_lines = "\n".join(
            f"  {name}: {text.strip().splitlines()[-1]}" for name, text in failures.items()
        )
        super().__init__(
            f"node(s) {names} failed; the program was stopped.\n{last_lines}\n"
            f"Tracebacks: {os.path.join(run_dir, lifecycle.FAILURES_DIR)}"
        )


def make_program(config, run_dir: str, start_time: float) -> lp.Program:
    """The distributed experiment of `config` as one `lp.Program`."""
    obs_size = config_lib.make_env(config).obs_size
    program = lp.Program("distrl")
    with program.group("replay"):
        replay_handle = program.add_node(
            lp.ReverbNode(functools.partial(replay.make_tables, config, obs_size))
        )
    with program.group("counter"):
        counter = program.add_node(lp.CourierNode(Counter))
    with program.group("learner"):
        learner = program.add_node(
            lp.CourierNode(Learner, config, replay_handle, counter, run_dir)
        )
    # Bounded RPCs: a call to a node that has already stopped fails instead of
    # blocking its caller (and, through courier's client teardown, its exit). Counts
    # are fire-and-forget and the counter starts first, so they need not wait for it.
    counter.set_client_kwargs(call_timeout=_RPC_TIMEOUT, wait_for_ready=False)
    learner.set_client_kwargs(call_timeout=_RPC_TIMEOUT)
    with program.group("actor"):
        for actor_id in range(config.num_actors):
            program.add_node(
                lp.CourierNode(Actor, config, actor_id, replay_handle, learner, counter, run_dir)
            )
    with program.group("evaluator"):
        program.add_node(lp.CourierNode(Evaluator, config, learner, counter, run_dir, start_time))
    return program


def local_resources():
    """Per-group process settings for `local_mp`."""
    cpu_node = PythonProcess(env=_CPU_NODE_ENV)
    quiet = PythonProcess(env={"TF_CPP_MIN_LOG_LEVEL": "2"})
    return {"actor": cpu_node, "evaluator": cpu_node, "counter": cpu_node,
            "replay": quiet, "learner": quiet}


def prepare_run_dir(config) -> str:
    """Creates the run directory and writes the resolved config into it."""
    run_dir = config.run_dir or os.path.join(
        "runs", f"{config.algorithm}-{time.strftime('%Y%m%d-%H%M%S')}"
    )
    run_dir = os.path.abspath(run_dir)
    os.makedirs(run_dir, exist_ok=True)
    with open(os.path.join(run_dir, "config.json"), "w") as f:
        f.write(config.to_json_best_effort(indent=2))
    return run_dir


def run(config, launch_type: str = "local_mp", terminal: str = "current_terminal"):
    """Validates, launches and waits for the program; returns (result dict | None, run_dir).

    The result is None when the program ended without the evaluator writing one
    (a node failed before the evaluator could). Raises ConfigError before anything
    starts when the config cannot work.
    """
    if launch_type not in config_lib.LAUNCH_TYPES:
        raise config_lib.ConfigError(
            f"launch type {launch_type!r} is unknown; valid: {config_lib.LAUNCH_TYPES}"
        )
    config_lib.validate(config)
    start_time = time.time()
    run_dir = prepare_run_dir(config)
    result_path = os.path.join(run_dir, "result.json")
    # A reused run directory must not report an earlier run's outcome.
    shutil.rmtree(os.path.join(run_dir, lifecycle.FAILURES_DIR), ignore_errors=True)
    if os.path.exists(result_path):
        os.remove(result_path)
    program = make_program(config, run_dir, start_time)
    if launch_type == "test_mt":
        manager = lp.launch(program, launch_type="test_mt", serialize_py_nodes=False)
    else:
        manager = lp.launch(
            program, launch_type="local_mp", terminal=terminal, local_resources=local_resources()
        )
    manager.wait()
    failures = lifecycle.read_failures(run_dir)
    if failures:
        raise NodeFailure(failures, run_dir)
    if not os.path.exists(result_path):
        return None, run_dir
    with open(result_path) as f:
        return json.load(f), run_dir
