"""The Ray actor that runs one Launchpad node on the Ray node it was placed on.

Kept apart from `distrl.program.ray.cluster` so that a Ray worker hosting a node imports only
Ray, Launchpad's entry point location and the bind shim, not the learning stack:
the node itself runs in a child process, started exactly as `local_mp` starts one
(Launchpad's `process_entry.py` on the pickled node function).
"""

import os
import shutil
import socket
import tempfile
import time

import portpicker
import ray

from distrl import compile_cache
from distrl.program import bindhost, nodeproc
from distrl.program.ray import STOP_FILE_ENV

_WATCH_PERIOD_S = 0.05


class NodeHost:
    """Ray actor: runs one Launchpad node in a child process on the Ray node it was placed on."""

    def __init__(self):
        compile_cache.enable()  # this Ray worker's env is the node's: share the cache
        self._dir = tempfile.mkdtemp(prefix="distrl-node-")
        self._stop_file = os.path.join(self._dir, "stop")
        self._process = None

    def locate(self, num_ports: int) -> dict:
        return dict(
            ip=ray.util.get_node_ip_address(),
            ray_node=ray.get_runtime_context().get_node_id(),
            hostname=socket.gethostname(),
            host_pid=os.getpid(),
            ports=[portpicker.pick_unused_port() for _ in range(num_ports)],
        )

    def start(self, payload: bytes, env: dict, output_path: str, attempt: int = 0) -> int:
        """Starts the node (again, after it exited: `attempt` n for its n-th restart, which
        the node reads from `distrl.nodes.lifecycle.attempt`); returns its PID."""
        data_file = os.path.join(self._dir, "node.pkl")
        with open(data_file, "wb") as f:
            f.write(payload)
        bind = bindhost.environment(ray.util.get_node_ip_address())
        # Ray forces OMP_NUM_THREADS=1 (or the actor's CPUs) on its workers; a node's
        # threads are set by its group's env, as under local_mp.
        inherited = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
        env = {**inherited, **env, **bind, STOP_FILE_ENV: self._stop_file}
        self._process = nodeproc.NodeProcess(data_file, env, output_path, first_attempt=attempt)
        return self._process.start()

    def restart(
        self, payload: bytes, env: dict, output_path: str, attempt: int, grace_seconds: float
    ) -> int:
        """Stops the running node (as `stop` does, its files kept) and starts `payload`
        instead, e.g. a pickle whose handles point to a node that moved; returns its PID."""
        if self._process is not None:
            self._process.stop(grace_seconds)
        return self.start(payload, env, output_path, attempt)

    def watch(self, seconds: float):
        """(exit code or None, whether the node asked to stop the program), as soon as the
        node exits or asks, or after `seconds`. Checked here, locally, every 50 ms: the
        launcher waits on one call per node instead of polling over the network."""
        deadline = time.monotonic() + seconds
        while True:
            code, asked = self._process.poll(), os.path.exists(self._stop_file)
            if code is not None or asked or time.monotonic() >= deadline:
                return code, asked
            time.sleep(_WATCH_PERIOD_S)

    def stop(self, grace_seconds: float) -> int | None:
        """SIGTERM; after the grace period a stack dump and SIGKILL; returns the exit code."""
        code = None if self._process is None else self._process.stop(grace_seconds)
        shutil.rmtree(self._dir, ignore_errors=True)
        return code
