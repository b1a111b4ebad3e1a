"""The Ray actor that runs one Launchpad node on the Ray node it was placed on.

Kept apart from `distrl.program.ray.cluster` so that a Ray worker hosting a node imports only
Ray, Launchpad's entry point location and the bind shim, not the learning stack:
the node itself runs in a child process, started exactly as `local_mp` starts one
(Launchpad's `process_entry.py` on the pickled node function).

A lost head (the launcher and Ray's control service, the GCS, on one machine) leaves
no one to report it: every Ray process ends itself once the GCS has not answered for
60 s (Ray's `gcs_rpc_server_reconnect_timeout_s`), and its node with it. So each host
watches for it (`_HeadWatch`): when neither the launcher has called nor the GCS
accepted a connection for `_HEAD_LOST_S`, the first host to see it writes
`failures/head.txt` in the run directory (the cause and how to resume), and every
host stops its node as a program stop does (the learner's final checkpoint), within
Ray's 60 s. A network pause of this machine alone that long looks the same from here
and ends its nodes the same way (Ray ends them at 60 s anyway).
"""

import datetime
import os
import shutil
import socket
import tempfile
import threading
import time

import ray

from distrl import compile_cache
from distrl.program import bindhost, nodeproc, ports
from distrl.program.ray import STOP_FILE_ENV
from distrl.records import failures

_WATCH_PERIOD_S = 0.05
# A head whose launcher has not called and whose GCS has refused connections this long
# is lost (Ray ends this machine's processes at 60 s); a 20 s pause is survived.
_HEAD_LOST_S = 40.0
_HEAD_CHECK_S = 1.0
# The node's stop after a lost head: it must end before Ray ends this process.
_HEAD_LOST_GRACE_S = 10.0
HEAD_FAILURE = "head"  # failures/head.txt


class NodeHost:
    """Ray actor: runs one Launchpad node in a child process on the Ray node it was placed on."""

    def __init__(self, run_dir: str | None = None, name: str = "node"):
        compile_cache.enable()  # this Ray worker's env is the node's: share the cache
        self._dir = tempfile.mkdtemp(prefix="distrl-node-")
        self._stop_file = os.path.join(self._dir, "stop")
        self._process = None
        self._head = _HeadWatch(self, run_dir, name) if run_dir else None
        self._ports = ports.Claims()  # held while this host lives: no other launcher's

    def locate(self, num_ports: int) -> dict:
        return dict(
            ip=ray.util.get_node_ip_address(),
            ray_node=ray.get_runtime_context().get_node_id(),
            hostname=socket.gethostname(),
            host_pid=os.getpid(),
            ports=[self._ports.port() for _ in range(num_ports)],
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
        pid = self._process.start()
        if self._head is not None:
            self._head.begin()
        return pid

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
        if self._head is not None:
            self._head.called()
        deadline = time.monotonic() + seconds
        while True:
            code, asked = self._process.poll(), os.path.exists(self._stop_file)
            if code is not None or asked or time.monotonic() >= deadline:
                return code, asked
            time.sleep(_WATCH_PERIOD_S)

    def stop(self, grace_seconds: float) -> int | None:
        """SIGTERM; after the grace period a stack dump and SIGKILL; returns the exit code."""
        if self._head is not None:
            self._head.end()
        code = None if self._process is None else self._process.stop(grace_seconds)
        shutil.rmtree(self._dir, ignore_errors=True)
        return code


class _HeadWatch:
    """A host's thread that notices a lost head (module docstring): the launcher's
    watch calls stopped and the GCS refusing connections, both for `_HEAD_LOST_S`."""

    def __init__(self, host: NodeHost, run_dir: str, name: str):
        self._host, self._run_dir, self._name = host, run_dir, name
        self._gcs = ray.get_runtime_context().gcs_address  # "ip:port", read while it answers
        self._where = f"{socket.gethostname()} ({ray.util.get_node_ip_address()})"
        self._last_call = time.monotonic()
        self._ended = threading.Event()
        self._thread = None

    def begin(self) -> None:
        self.called()
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="head-watch", daemon=True)
            self._thread.start()

    def called(self) -> None:
        self._last_call = time.monotonic()

    def end(self) -> None:
        """The launcher stops the node: nothing to watch for any more."""
        self._ended.set()

    def _run(self) -> None:
        answered = time.monotonic()
        while not self._ended.wait(_HEAD_CHECK_S):
            now = time.monotonic()
            if self._gcs_answers():
                answered = now
            elif min(now - answered, now - self._last_call) >= _HEAD_LOST_S:
                self._head_lost(now - max(answered, self._last_call))
                return

    def _gcs_answers(self) -> bool:
        host, port = self._gcs.rsplit(":", 1)
        try:
            socket.create_connection((host.strip("[]"), int(port)), timeout=_HEAD_CHECK_S).close()
            return True
        except OSError:
            return False

    def _head_lost(self, seconds: float) -> None:
        since = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(seconds=seconds)
        report = (
            f"the Ray head was lost (the launcher and Ray's control service, GCS at "
            f"{self._gcs}): no call from the launcher and no answer from the GCS since "
            f"{since:%Y-%m-%d %H:%M:%S} UTC ({seconds:.0f} s), seen from {self._name}'s host on "
            f"{self._where}; every node stops. Resume the run on a new head with "
            f"`launch/train.py --resume={self._run_dir} --lp_launch_type=ray "
            f"--ray_address=<new head>:6379`\n"
        )
        first = failures.record_failure_once(self._run_dir, HEAD_FAILURE, report)
        print(f"distrl: {report.strip()}" if first else "distrl: the Ray head was lost", flush=True)
        process = self._host._process
        if process is not None and process.poll() is None:
            code = process.stop(_HEAD_LOST_GRACE_S)
            print(f"distrl: {self._name} stopped (exit code {code})", flush=True)
