"""The Ray actor that runs one Launchpad node on the Ray node it was placed on.

Kept apart from `distrl.program.ray.cluster` so that a Ray worker hosting a node imports only
Ray, Launchpad's entry point location and the bind shim, not the learning stack:
the node itself runs in a child process, started exactly as `local_mp` starts one
(Launchpad's `process_entry.py` on the pickled node function).
"""

import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from typing import Optional

import portpicker
import ray

from distrl.program import bindhost
from distrl.program.ray import STOP_FILE_ENV

_PR_SET_PDEATHSIG = 1
_HOST_PID_ENV = "DISTRL_NODE_HOST_PID"
_WATCH_PERIOD_S = 0.05


# Run in the node process before Launchpad's entry script: it gets SIGKILL when its
# host actor's process dies (set after exec, not in a preexec_fn, which is unsafe in
# Ray's threaded worker), and exits if that happened before it could ask.
_BOOTSTRAP = f"""
import ctypes, os, runpy, signal, sys
ctypes.CDLL(None).prctl({_PR_SET_PDEATHSIG}, signal.SIGKILL)
if os.getppid() != int(os.environ["{_HOST_PID_ENV}"]):
    sys.exit(1)
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def _process_entry() -> str:
    """Launchpad's entry script for a pickled node (what `local_mp` runs), on this machine."""
    package_dir = importlib.util.find_spec("launchpad").submodule_search_locations[0]
    return os.path.join(package_dir, "nodes", "python", "process_entry.py")


class NodeHost:
    """Ray actor: runs one Launchpad node in a child process on the Ray node it was placed on."""

    def __init__(self):
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

    def start(self, payload: bytes, env: dict, output_path: str) -> int:
        data_file = os.path.join(self._dir, "node.pkl")
        with open(data_file, "wb") as f:
            f.write(payload)
        os.makedirs(os.path.dirname(output_path), exist_ok=True)
        bind = bindhost.environment(ray.util.get_node_ip_address())
        # Ray forces OMP_NUM_THREADS=1 (or the actor's CPUs) on its workers; a node's
        # threads are set by its group's env, as under local_mp.
        inherited = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
        env = {**inherited, **env, **bind, STOP_FILE_ENV: self._stop_file,
               _HOST_PID_ENV: str(os.getpid())}
        command = [sys.executable, "-c", _BOOTSTRAP, _process_entry(),
                   f"--data_file={data_file}", "--lp_task_id=0"]
        with open(output_path, "ab") as out:
            self._process = subprocess.Popen(
                command, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT
            )
        return self._process.pid

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

    def stop(self, grace_seconds: float) -> Optional[int]:
        """SIGTERM, then SIGKILL after the grace period; returns the exit code."""
        process = self._process
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(grace_seconds)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        shutil.rmtree(self._dir, ignore_errors=True)
        return None if process is None else process.returncode
