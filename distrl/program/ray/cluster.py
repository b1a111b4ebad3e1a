"""Stage 7, on a cluster: the same `lp.Program` launched on Ray (`--lp_launch_type=ray`).

The one module that knows Ray. Launchpad's open-source launchers put every node on
one machine; this one keeps Launchpad's nodes, handles, pickling and process entry
point, and changes only where each node runs and what its handles resolve to:

1. Place: one `nodehost.NodeHost` Ray actor per Launchpad node, asking for its group's
   resources (`placement_options`). Each host reports its Ray node, its IP and, for
   every `lp.Address` its node owns, a port that is free on that machine.
2. Bind: each address is bound to `HostPortAddress(ip, port)`, so a handle resolves
   to the serving node's machine wherever it is dereferenced: actors on one machine
   write to the Reverb server on another and pull parameters from the learner there.
3. Start: each node's function is pickled the way `local_mp` pickles it, and its host
   runs Launchpad's own `process_entry.py` on it in a child process (which dies with
   the host), output in `<run_dir>/logs/nodes/<group>/<i>`. The servers bind the
   host's cluster address (`distrl.program.bindhost`).
4. Watch and stop: a node's `lp.stop()` (the evaluator at its target or budget, a
   failing node) touches its host's stop file (`lifecycle.stop_via_file`), which the
   host watches locally (`NodeHost.watch`, one long call per node). On that,
   on a node exiting non-zero or its Ray node being lost (recorded in `failures/`
   with its host), and on Ctrl-C or SIGTERM here, every node gets SIGTERM, SIGKILL
   after `--lp_termination_notice_secs`, and every host actor is killed.

The run directory must be on a file system every machine sees (each node writes its
logs, checkpoints and results there), and every machine needs the same install.
"""

import contextlib
import dataclasses
import json
import logging as std_logging
import os
import signal
import socket
import threading
import time

import ray
from absl import logging
from launchpad import address as lp_address

from distrl import rundir
from distrl.config import ConfigError
from distrl.program import lifecycle, nodeproc, progress, staging, supervisor
from distrl.program.errors import LaunchError
from distrl.program.ray import nodehost

PLACEMENT_FILE = "placement.json"
NAMESPACE = "distrl"
# A host runs one call at a time, so a stop waits for its node's current watch call:
# this bounds that wait (and costs one small RPC per node per second).
_WATCH_S = 1.0
# How long the watch waits on Ray at a time before it looks at a stop signal.
_SIGNAL_POLL_S = 0.2
_PLACEMENT_TIMEOUT_S = 120.0
_RPC_TIMEOUT_S = 30.0
_START_RAY = (
    "Start one first: `ray start --head` on the head machine, then "
    "`ray start --address=<head ip>:6379` on each other machine."
)


class HostPortAddress(lp_address.AbstractAddressBuilder):
    """An `lp.Address` builder for a node on another machine: `<ip>:<port>`."""

    def __init__(self, host: str, port: int):
        self._address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    def build(self) -> str:
        return self._address


@dataclasses.dataclass
class _Node:
    """One Launchpad node as this launcher sees it."""

    name: str  # "learner", "actor/3": the name its failures and output go by
    label: str  # its program group
    node: object  # the lp node
    options: dict  # the Ray actor options that place it
    output: str  # its output file
    host: object = None  # its NodeHost actor
    where: dict | None = None  # what the host reported by `locate`

    def describe(self) -> str:
        w = self.where or {}
        ray_node = w.get("ray_node", "?")[:12]
        return f"{self.name} on host {w.get('hostname')} ({w.get('ip')}, Ray node {ray_node})"


def placement_options(label: str, config, cluster_has_gpu: bool) -> dict:
    """Ray actor options for a node of group `label`.

    Actors reserve `config.ray.actor_cpus` each and are spread over the Ray nodes;
    the learner takes a GPU when `learner_device` says so ("auto": when the cluster
    has one); replay and learner need their custom resource when the config names
    one. The rest (evaluator, counter) may run anywhere.
    """
    r = config.ray
    if label == "actor":
        return dict(num_cpus=r.actor_cpus, scheduling_strategy="SPREAD")
    options = dict(num_cpus=0)
    resource = {"replay": r.replay_resource, "learner": r.learner_resource}.get(label, "")
    if resource:
        options["resources"] = {resource: 0.001}
    if label == "learner":
        gpu = r.learner_device == "gpu" or (r.learner_device == "auto" and cluster_has_gpu)
        options["num_gpus"] = 1 if gpu else 0
    return options


def check_fits(config, nodes_resources: list[dict]) -> None:
    """ConfigError when no placement of the program on these Ray nodes can exist."""
    r = config.ray
    total_cpus = sum(n.get("CPU", 0) for n in nodes_resources)
    largest = max((n.get("CPU", 0) for n in nodes_resources), default=0)
    if r.actor_cpus > largest:
        raise ConfigError(
            f"config.ray.actor_cpus={r.actor_cpus}, but the largest Ray node has {largest:g} CPUs"
        )
    need = config.num_actors * r.actor_cpus
    fit = sum(int(n.get("CPU", 0) // r.actor_cpus) for n in nodes_resources)
    if config.num_actors > fit:
        raise ConfigError(
            f"config.num_actors={config.num_actors} x config.ray.actor_cpus={r.actor_cpus} "
            f"= {need:g} CPUs, but the Ray cluster fits {fit} such actors "
            f"({total_cpus:g} CPUs on {len(nodes_resources)} nodes)"
        )
    for field in ("replay_resource", "learner_resource"):
        name = r[field]
        if name and not any(n.get(name, 0) > 0 for n in nodes_resources):
            have = sorted({k for n in nodes_resources for k in n if not k.startswith("node:")})
            raise ConfigError(
                f"config.ray.{field}={name!r}: no Ray node has that resource; "
                f"the cluster's resources: {have}"
            )
    if r.learner_device == "gpu" and not any(n.get("GPU", 0) >= 1 for n in nodes_resources):
        raise ConfigError("config.ray.learner_device='gpu', but no Ray node has a GPU")


def check_address(address: str) -> None:
    """Fails fast for an address Ray would retry for minutes: ConfigError if malformed,
    LaunchError if nothing listens there. "auto" is left to Ray (it fails at once)."""
    if address == "auto":
        return
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(
            f"--ray_address={address!r}; valid: HOST:PORT of the head "
            "(as `ray start --head` printed it) or auto"
        )
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=5).close()
    except OSError as err:
        raise LaunchError(
            f"no Ray cluster answers at --ray_address={address} ({err}). " + _START_RAY
        ) from err


@contextlib.contextmanager
def connected(address: str, config):
    """Joins the Ray cluster at `address` as a driver for the block, after checking that
    it can hold `config`'s program (ConfigError if not; LaunchError if there is no cluster)."""
    check_address(address)
    try:
        ray.init(
            address=address,
            namespace=NAMESPACE,
            log_to_driver=False,
            logging_level=std_logging.WARNING,
        )
    except (ConnectionError, RuntimeError, ValueError) as err:
        raise LaunchError(
            f"cannot join a Ray cluster at --ray_address={address}: {err} " + _START_RAY
        ) from err
    try:
        check_fits(config, _alive_nodes())
        yield
    finally:
        ray.shutdown()


@contextlib.contextmanager
def stop_signals_noted():
    """Ctrl-C, SIGTERM and SIGHUP set the event this yields, instead of raising.

    Seen in two full-suite runs: after a Ctrl-C the driver went on renewing its watch
    calls for minutes (six a second in its Ray core worker log) and stopped nothing,
    until the test's cluster was torn down. A KeyboardInterrupt surfaces wherever the
    main thread runs its next Python bytecode, which on a Ray driver may be inside
    Ray's own code, and nothing guarantees that it reaches this launcher (Python code
    that Ray's native core calls back into cannot pass an exception on: it is printed
    and dropped). A handler that only sets an event has nothing to lose; the watch
    looks at it every `_SIGNAL_POLL_S`.
    """
    signalled = threading.Event()

    def note(signum, frame):
        del signum, frame
        signalled.set()

    signals = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {sig: signal.signal(sig, note) for sig in signals}
    try:
        yield signalled
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _alive_nodes() -> list[dict]:
    return [n["Resources"] for n in ray.nodes() if n["Alive"]]


def run(program, config, run_dir: str, envs: dict, stream) -> None:
    """Launches `program` on the cluster joined by `connected` and waits until it has stopped.

    `envs` maps each group to its node processes' environment variables.
    """
    has_gpu = any(n.get("GPU", 0) >= 1 for n in _alive_nodes())
    output_dir = rundir.node_output_dir(run_dir)
    nodes = [
        _Node(
            name=s.name,
            label=s.label,
            node=s.node,
            options=placement_options(s.label, config, has_gpu),
            output=staging.output_path(output_dir, s),
        )
        for s in staging.stage(program)
    ]
    _Launch(nodes, config, run_dir, envs).run(stream)


class _Launch:
    """Places, binds, starts, watches and stops the nodes of one program."""

    def __init__(self, nodes: list[_Node], config, run_dir: str, envs: dict):
        self._nodes = nodes
        self._envs = envs
        self._config = config
        self._run_dir = run_dir
        run_name = os.path.basename(os.path.normpath(run_dir))
        self._actor_prefix = f"{run_name}-{int(time.time())}"

    def run(self, stream) -> None:
        try:
            self._place()
            self._bind()
            self._start()
            with (
                progress.ProgressLine(self._run_dir, self._config, stream),
                stop_signals_noted() as signalled,
            ):
                self._watch(signalled)
            if signalled.is_set():
                logging.info("distrl: interrupted; stopping every node")
        finally:
            with supervisor.stop_signals_ignored():
                self._stop()
        self._report_failures()

    def _place(self) -> None:
        host_class = ray.remote(nodehost.NodeHost)
        for n in self._nodes:
            n.host = host_class.options(
                name=f"{self._actor_prefix}/{n.name}", max_restarts=0, **n.options
            ).remote()
        refs = {n.host.locate.remote(len(n.node.addresses)): n for n in self._nodes}
        ready, pending = ray.wait(list(refs), num_returns=len(refs), timeout=_PLACEMENT_TIMEOUT_S)
        if pending:
            waiting = ", ".join(f"{refs[r].name} {refs[r].options}" for r in pending)
            raise LaunchError(
                f"the Ray cluster did not place these nodes within {_PLACEMENT_TIMEOUT_S:.0f} s "
                f"(busy or missing resources): {waiting}"
            )
        for ref in ready:
            refs[ref].where = ray.get(ref)

    def _bind(self) -> None:
        """Each address to a port on its own node's host (contexts: `staging.stage`)."""
        for n in self._nodes:
            for address, port in zip(n.node.addresses, n.where["ports"]):
                address.bind(HostPortAddress(n.where["ip"], port))

    def _start(self) -> None:
        tmp = os.path.join(self._run_dir, rundir.TMP_DIR)
        starts = [
            n.host.start.remote(staging.pickled(n, tmp), self._envs[n.label], n.output)
            for n in self._nodes
        ]
        for n, pid in zip(self._nodes, ray.get(starts, timeout=_RPC_TIMEOUT_S)):
            n.where["pid"] = pid
        with open(os.path.join(self._run_dir, PLACEMENT_FILE), "w") as f:
            json.dump({n.name: n.where for n in self._nodes}, f, indent=2)

    def _watch(self, signalled: threading.Event) -> None:
        """Returns once a node asked to stop, failed or was lost, every node has exited,
        or `signalled` is set (a stop signal to this launcher).

        One `watch` call per node is always in flight; each returns when its node exits
        or asks to stop, or after _WATCH_S, and is then renewed. A call that has not come
        back _RPC_TIMEOUT_S after that means its Ray node is lost.
        """
        pending = {}  # ObjectRef -> (node, when the call was made)

        def renew(n):
            pending[n.host.watch.remote(_WATCH_S)] = (n, time.monotonic())

        for n in self._nodes:
            renew(n)
        while pending and not signalled.is_set():
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=_SIGNAL_POLL_S)
            for ref in ready:
                n, _ = pending.pop(ref)
                try:
                    code, asked = ray.get(ref)
                except ray.exceptions.RayError as err:
                    self._record(n, f"its Ray node was lost ({type(err).__name__})")
                    return
                if asked:
                    return
                if code is not None and code != 0:
                    self._record(n, nodeproc.exit_cause(code))
                    return
                if code is None:
                    renew(n)
            overdue = [
                n for n, t in pending.values() if time.monotonic() - t > _WATCH_S + _RPC_TIMEOUT_S
            ]
            for n in overdue:
                self._record(n, f"its host stopped answering for {_RPC_TIMEOUT_S:.0f} s")
            if overdue:
                return

    def _stop(self) -> None:
        """Stops every node (SIGTERM, then SIGKILL) and kills every host actor."""
        placed = [n for n in self._nodes if n.where is not None]  # the others never ran
        grace = supervisor.termination_notice_secs()
        start = time.time()
        refs = [n.host.stop.remote(grace) for n in placed]
        # One deadline for all: the hosts stop their nodes at the same time.
        ray.wait(refs, num_returns=len(refs), timeout=grace + _RPC_TIMEOUT_S)
        for n, ref in zip(placed, refs):
            try:
                code = ray.get(ref, timeout=0.1)
                logging.info(
                    "distrl: %s stopped (exit code %s) %.1f s after the stop began",
                    n.name,
                    code,
                    time.time() - start,
                )
            except (ray.exceptions.RayError, TimeoutError) as err:
                logging.warning("distrl: stopping %s: %s", n.name, err)
        for n in self._nodes:
            if n.host is not None:
                ray.kill(n.host, no_restart=True)

    def _record(self, n: _Node, why: str) -> None:
        """The failure report of a node that exited or was lost (`lifecycle.record_exit`)."""
        lifecycle.record_exit(self._run_dir, n.name, why, n.output)

    def _report_failures(self) -> None:
        """Adds the host each failed node ran on to its failure report."""
        for n in self._nodes:
            lifecycle.annotate_failure(self._run_dir, n.name, n.describe())
