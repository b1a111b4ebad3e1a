"""Stage 7, on a cluster: the same `lp.Program` launched on Ray (`--lp_launch_type=ray`).

The one module that knows Ray. Launchpad's open-source launchers put every node on
one machine; this one keeps Launchpad's nodes, handles, pickling and process entry
point, and changes only where each node runs and what its handles resolve to:

1. Place: one `nodehost.NodeHost` Ray actor per Launchpad node, asking for its group's
   resources (`placement_options`). Each host reports its Ray node, its IP and, for
   every `lp.Address` its node owns, a port that is free on that machine.
2. Bind: each address is bound to `staging.HostPortAddress(ip, port)`, so a handle resolves
   to the serving node's machine wherever it is dereferenced: actors on one machine
   write to the Reverb server on another and pull parameters from the learner there.
3. Start: each node's function is pickled the way `local_mp` pickles it, and its host
   runs Launchpad's own `process_entry.py` on it in a child process (which dies with
   the host), output in `<run_dir>/logs/nodes/<group>/<i>`. The servers bind the
   host's cluster address (`distrl.program.bindhost`).
4. Watch: a node's `lp.stop()` (the evaluator at its target or budget, a failing
   node) touches its host's stop file (`lifecycle.stop_via_file`), which the host
   watches locally (`NodeHost.watch`, one long call per node). A host that fails a
   call as unreachable (`ActorUnavailableError`) or does not answer one is not lost
   by that: a network pause does both. It is lost on Ray's verdict (`_Launch._verdict`:
   its Ray node dead once Ray's health checks give up, or its actor dead), or when
   it has not answered for `_UNREACHABLE_GRACE_S` while Ray still counts its node
   alive; until then its watch call is renewed, and a host that answers again goes
   on where it was (nothing restarted, nothing moved). A node exiting
   non-zero or whose host is lost is recorded in `failures/` with its host and,
   while `config.restart` allows (the local_mp policy, `supervisor.restart_delay`
   and `record_restart`), started again after its backoff: on the same host (same
   machine and ports, so every handle to it stays valid), or, when its host was
   lost, on a new host the cluster places with its group's options, its addresses
   bound to that machine's new ports. The nodes that hold a handle to a node that
   moved (`staging.holders`: a lost replay's are the learner, the actors and the
   evaluator) carry its old address in their pickles, so each is restarted on its
   own host from a pickle made after the rebind, listed as a restart with the
   cause "restarted: replay moved to <host>" (not counted against its own
   `config.restart`: it did not fail). What a node loads when it starts again is
   the same wherever it runs, from the shared run directory: the replay Reverb's
   newest checkpoint, the learner its newest checkpoint, the counter its totals.
5. Scale: a `launch/scale.py` request in the work directory (`scaling.serve`, as
   under local_mp) adds actors (made by the program's `ActorMaker`, placed with the
   actor group's options, bound, started and watched like the launch's; refused when
   the alive nodes' CPUs cannot hold them, `check_fits`) or removes the newest (their
   hosts stop them as at a program stop, without holding up the watch). With
   `config.ray.actors="auto"` the watch also follows Ray's node table (`_follow`):
   the actors of a machine Ray marked dead are removed, not placed again, and the
   count goes to one per `ray.actor_cpus` of the alive nodes (`follow_count`).
6. Stop: on a stop file, a failure beyond the restarts, or Ctrl-C, SIGTERM or SIGHUP
   here, every node gets SIGTERM, SIGKILL after `--lp_termination_notice_secs`, and
   every host actor is killed.

The run directory must be on a file system every machine sees (each node writes its
logs, checkpoints and results there), and every machine needs the same install.
"""

import collections
import contextlib
import dataclasses
import logging as std_logging
import os
import shutil
import signal
import socket
import threading
import time

import ray
from absl import logging

from distrl import files
from distrl.config import ConfigError
from distrl.program import nodeproc, progress, scaling, staging, supervisor
from distrl.program.errors import LaunchError
from distrl.program.ray import nodehost
from distrl.records import failures, rundir

PLACEMENT_FILE = "placement.json"
NAMESPACE = "distrl"
# A host runs one call at a time, so a stop waits for its node's current watch call:
# this bounds that wait (and costs one small RPC per node per second).
_WATCH_S = 1.0
# How long the watch waits on Ray at a time before it looks at a stop signal.
_SIGNAL_POLL_S = 0.2
_PLACEMENT_TIMEOUT_S = 120.0
# How long an actor added during the run may wait for its placement before the change
# is refused (the watch of every other node waits meanwhile).
_SCALE_PLACEMENT_S = 30.0
_RPC_TIMEOUT_S = 30.0
# A watch call that has not come back this long after its _WATCH_S counts as unanswered
# (its host unreachable, `_Launch._unreachable`); a new call is sent, which also makes a
# connection left half-open by a network pause fail at once instead of hanging.
_LATE_S = 5.0
# How long after an unreachable host's last failed call the next one is made.
_RETRY_S = 1.0
# The most a host may stay unreachable while Ray counts its node alive (a partition that
# Ray's health checks do not see); Ray's verdict, when it comes first, decides at once.
_UNREACHABLE_GRACE_S = 60.0
# How often Ray's node table (the GCS's verdict on each node) is read while a host is unreachable.
_NODES_READ_S = 1.0
_START_RAY = (
    "Start one first: `ray start --head` on the head machine, then "
    "`ray start --address=<head ip>:6379` on each other machine."
)


@dataclasses.dataclass
class _Node:
    """One Launchpad node as this launcher sees it."""

    name: str  # "learner", "actor/3": the name its failures and output go by
    label: str  # its program group
    node: object  # the lp node
    options: dict  # the Ray actor options that place it
    output: str  # its output file
    host: object = None  # its NodeHost actor (None once its Ray node was lost)
    where: dict | None = None  # what the host reported by `locate`
    attempt: int = 0  # 0 for its first start, n after its n-th restart
    failures: int = 0  # its own exits and losses restarted so far (what config.restart bounds)
    unreachable_since: float | None = None  # monotonic time its host stopped answering
    holders: list = dataclasses.field(default_factory=list)  # the _Nodes holding its handles

    def machine(self) -> str:
        w = self.where or {}
        ray_node = w.get("ray_node", "?")[:12]
        return f"host {w.get('hostname')} ({w.get('ip')}, Ray node {ray_node})"

    def describe(self) -> str:
        return f"{self.name} on {self.machine()}"


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


def actor_slots(config, nodes_resources: list[dict]) -> int:
    """How many actors of `config.ray.actor_cpus` CPUs these Ray nodes hold, node by node."""
    return sum(int(n.get("CPU", 0) // config.ray.actor_cpus) for n in nodes_resources)


def follow_count(config, nodes_resources: list[dict]) -> int:
    """The actor count of a run that follows the cluster (`config.ray.actors="auto"`):
    one per actor slot of these nodes (`actor_slots`), at most `ray.max_actors` (0: no
    bound), the largest such count the config accepts (`scaling.check_count`).
    ConfigError when that is below `ray.min_actors`."""
    r = config.ray
    slots = actor_slots(config, nodes_resources)
    top = min(slots, r.max_actors) if r.max_actors else slots
    for count in range(top, r.min_actors - 1, -1):
        try:
            scaling.check_count(config, count, local=False)
            return count
        except ConfigError:
            continue
    cpus = sum(n.get("CPU", 0) for n in nodes_resources)
    fits = (
        f"config.ray.actors='auto': the Ray cluster fits {slots} actors of config.ray."
        f"actor_cpus={r.actor_cpus:g} ({cpus:g} CPUs on {len(nodes_resources)} nodes)"
    )
    if top < r.min_actors:
        raise ConfigError(f"{fits}, fewer than config.ray.min_actors={r.min_actors}")
    raise ConfigError(f"{fits}; the config accepts no count from {r.min_actors} to {top}")


def launch_count(config) -> int | None:
    """The actor count a run that follows the cluster starts with (None: config.num_actors)."""
    return follow_count(config, _alive_nodes()) if config.ray.actors == "auto" else None


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
def connected(address: str, config, actors: int | None = None):
    """Joins the Ray cluster at `address` as a driver for the block, after checking that
    it can hold `config`'s program with `actors` actors (default: `num_actors`, or the
    cluster's count with `ray.actors="auto"`) (ConfigError if not; LaunchError if there
    is no cluster)."""
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
        nodes = _alive_nodes()
        sized = config.copy_and_resolve_references()
        if config.ray.actors == "auto":  # the count the launch will take (`launch_count`)
            sized.num_actors = follow_count(config, nodes)
        elif actors is not None:
            sized.num_actors = actors
        check_fits(sized, nodes)
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


def _answer(ref) -> tuple:
    """(exit code or None, whether the node asked to stop, the error or None) of a
    finished `watch` call."""
    try:
        code, asked = ray.get(ref)
        return code, asked, None
    except ray.exceptions.RayError as err:
        return None, False, err


def _alive_nodes() -> list[dict]:
    return [n["Resources"] for n in ray.nodes() if n["Alive"]]


def run(program, config, run_dir: str, envs: dict, stream) -> list[dict]:
    """Launches `program` on the cluster joined by `connected`, waits until it has stopped
    and returns the restarts made (`config.restart`, as under local_mp).

    `envs` maps each group to its node processes' environment variables.
    """
    has_gpu = any(n.get("GPU", 0) >= 1 for n in _alive_nodes())
    output_dir = rundir.node_output_dir(run_dir)
    staged = staging.stage(program)
    nodes = {
        s.name: _Node(
            name=s.name,
            label=s.label,
            node=s.node,
            options=placement_options(s.label, config, has_gpu),
            output=staging.output_path(output_dir, s),
        )
        for s in staged
    }
    for s in staged:
        nodes[s.name].holders = [nodes[h.name] for h in staging.holders(staged, s)]
    actors = _Actors(
        getattr(program, "more_actors", None),
        placement_options("actor", config, has_gpu),
        output_dir,
    )
    return _Launch(list(nodes.values()), config, run_dir, envs, actors).run(stream)


@dataclasses.dataclass
class _Actors:
    """What the launcher needs to add actors during the run (`_Launch._scale_to`)."""

    maker: object  # topology.ActorMaker, or None (a program that cannot add actors)
    options: dict  # their Ray actor options
    output_dir: str  # logs/nodes/


class _Launch:
    """Places, binds, starts, watches, scales and stops the nodes of one program."""

    def __init__(self, nodes: list[_Node], config, run_dir: str, envs: dict, actors: _Actors):
        self._nodes = nodes
        self._envs = envs
        self._config = config
        self._run_dir = run_dir
        run_name = os.path.basename(os.path.normpath(run_dir))
        self._actor_prefix = f"{run_name}-{int(time.time())}"
        self._host_class = ray.remote(nodehost.NodeHost)
        self._hosts_made = collections.Counter()  # node name -> host actors made for it
        self._max_restarts = config.restart.max_per_node
        self._backoff = config.restart.backoff_seconds
        self._began = time.time()
        self._line = None
        self._retired = []  # host actors of nodes placed again elsewhere
        self._pending, self._due, self._retry = {}, {}, {}  # see _watch
        self._node_alive, self._nodes_read = {}, 0.0  # Ray's node table, when read (_verdict)
        self._actors = actors
        self._work = ""  # the work directory: scale requests (`scaling`)
        self._removing = {}  # stop call of a removed actor's host -> its _Node
        self._auto = config.ray.actors == "auto"
        self._followed, self._alive_seen = 0.0, None  # `_follow`'s last read, its alive nodes
        self.restarts: list[dict] = []

    def run(self, stream) -> list[dict]:
        self._work = scaling.open_work_dir(self._run_dir, "ray")
        try:
            self._place()
            self._bind()
            self._start()
            if self._actors.maker is not None:
                launched = [n.name for n in self._nodes if n.label == "actor"]
                change = scaling.Change(len(launched), 0, launched, [], "launch")
                scaling.record(self._run_dir, change, 0.0)
            with (
                progress.ProgressLine(self._run_dir, self._config, stream) as self._line,
                stop_signals_noted() as signalled,
            ):
                self._watch(signalled)
            if signalled.is_set():
                logging.info("distrl: interrupted; stopping every node")
        finally:
            self._line = None
            with supervisor.stop_signals_ignored():
                self._stop()
            shutil.rmtree(self._work, ignore_errors=True)
        self._report_failures()
        return self.restarts

    def _new_host(self, n: _Node):
        made = self._hosts_made[n.name]  # a node placed again, or an actor id used again
        suffix = f"#{made}" if made else ""  # ... gets a name of its own
        self._hosts_made[n.name] += 1
        return self._host_class.options(
            name=f"{self._actor_prefix}/{n.name}{suffix}", max_restarts=0, **n.options
        ).remote(self._run_dir, n.name)

    def _place(self) -> None:
        for n in self._nodes:
            n.host = self._new_host(n)
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
                address.bind(staging.HostPortAddress(n.where["ip"], port))

    def _pickled(self, n: _Node) -> bytes:
        """The node's function with every address as bound now."""
        return staging.pickled(n, os.path.join(self._run_dir, rundir.TMP_DIR))

    def _start(self) -> None:
        starts = [
            n.host.start.remote(self._pickled(n), self._envs[n.label], n.output)
            for n in self._nodes
        ]
        for n, pid in zip(self._nodes, ray.get(starts, timeout=_RPC_TIMEOUT_S)):
            n.where["pid"] = pid
        self._write_placement()

    def _write_placement(self) -> None:
        placement = {n.name: n.where for n in self._nodes}
        files.write_json(os.path.join(self._run_dir, PLACEMENT_FILE), placement, indent=2)

    def _watch(self, signalled: threading.Event) -> None:
        """Returns once a node asked to stop, every node has exited, a node failed or was
        lost beyond what `config.restart` allows, or `signalled` is set (a stop signal).

        One `watch` call per node is always in flight; each returns when its node exits
        or asks to stop, or after _WATCH_S, and is then renewed. A call that fails or has
        not come back _LATE_S after that makes its host unreachable (`_unreachable`):
        lost on Ray's verdict, else called again after _RETRY_S. A failed node is
        started again after its backoff (`_start_due`).
        """
        self._pending = {}  # ObjectRef -> (node, when the call was made)
        self._due = {}  # node name -> (node, when to start it again)
        self._retry = {}  # node name -> (node, when to call its unreachable host again)
        for n in self._nodes:
            self._renew(n)
        while (self._pending or self._due or self._retry) and not signalled.is_set():
            ready = []
            if self._pending:
                ready, _ = ray.wait(list(self._pending), num_returns=1, timeout=_SIGNAL_POLL_S)
            else:  # only nodes waiting out their backoff or their next call
                time.sleep(_SIGNAL_POLL_S)
            if not (self._answered(ready) and self._late() and self._start_due()):
                return
            self._call_again()
            self._reap()
            self._follow()
            scaling.serve(
                self._work,
                self._run_dir,
                time.time() - self._began,
                self._scale_to,
                lambda: len(self._actor_nodes()),
                self._say,
            )

    def _renew(self, n: _Node) -> None:
        self._pending[n.host.watch.remote(_WATCH_S)] = (n, time.monotonic())

    def _answered(self, ready: list) -> bool:
        """Handles finished watch calls; False when the program is to stop."""
        for ref in ready:
            if ref not in self._pending:  # its actor was removed meanwhile (`_follow`)
                continue
            n, _ = self._pending.pop(ref)
            code, asked, err = _answer(ref)
            if err is not None:
                if not self._unreachable(n, err):
                    return False
                continue
            if n.unreachable_since is not None:
                gone = time.monotonic() - n.unreachable_since
                self._say(f"{n.name}'s host answers again after {gone:.1f} s; nothing moved")
                n.unreachable_since = None
            if asked:
                return False
            if code is None:
                self._renew(n)
            elif code != 0 and not self._failed(n, nodeproc.exit_cause(code), host_lost=False):
                return False
        return True

    def _late(self) -> bool:
        """Hosts whose watch call is overdue are unreachable (`_unreachable`); False when
        that ends the program."""
        now = time.monotonic()
        for ref, (n, t) in list(self._pending.items()):
            if ref in self._pending and now - t > _WATCH_S + _LATE_S:  # (`_follow` drops some)
                del self._pending[ref]
                if not self._unreachable(n, None, since=t + _WATCH_S):
                    return False
        return True

    def _unreachable(self, n: _Node, err: Exception | None, since: float | None = None) -> bool:
        """`n`'s host failed its watch call with `err`, or did not answer it (None) when it
        was due, at `since` (monotonic; default now).

        Lost when Ray's verdict says so (`_verdict`): then moved like any lost host
        (`_failed`). Otherwise called again after _RETRY_S: a network pause costs
        nothing more than the wait. False when the loss ends the program."""
        now = time.monotonic()
        if n.unreachable_since is None:
            n.unreachable_since = now if since is None else since
            what = type(err).__name__ if err is not None else "no answer"
            self._say(
                f"{n.name}'s host on {n.machine()} is unreachable ({what}); waiting for Ray's "
                f"verdict on its node, at most {_UNREACHABLE_GRACE_S:.0f} s"
            )
        lost = self._verdict(n, err, now)
        if lost:
            n.unreachable_since = None
            if self._auto and n.label == "actor" and self._machine_left(n):
                self._follow(force=True)  # not placed again: removed, the count follows
                return True
            return self._failed(n, lost, host_lost=True)
        self._retry[n.name] = (n, now + _RETRY_S)
        return True

    def _verdict(self, n: _Node, err: Exception | None, now: float) -> str:
        """Why `n`'s unreachable host counts as lost, or "" while it may come back: its
        Ray node dead in Ray's node table (the GCS's health checks gave up on it), its
        actor dead (a call failed otherwise than as unavailable), or no answer for
        _UNREACHABLE_GRACE_S."""
        died = isinstance(err, ray.exceptions.RayActorError) and not isinstance(
            err, ray.exceptions.ActorUnavailableError
        )
        if died or now - self._nodes_read >= _NODES_READ_S:  # a dead actor: is its node too?
            with contextlib.suppress(Exception):  # the GCS may be slow; read it next time
                self._node_alive = {m["NodeID"]: m["Alive"] for m in ray.nodes()}
                self._nodes_read = now
        gone = now - n.unreachable_since
        if self._node_alive.get((n.where or {}).get("ray_node")) is False:
            return f"its Ray node was lost (Ray marked it dead; unreachable for {gone:.1f} s)"
        if died:
            return f"its host was lost ({type(err).__name__})"
        if gone >= _UNREACHABLE_GRACE_S:
            return f"its host did not answer for {gone:.0f} s while Ray counted its node alive"
        return ""

    def _call_again(self) -> None:
        """A new watch call to each unreachable host whose _RETRY_S is over."""
        now = time.monotonic()
        for name, (n, when) in list(self._retry.items()):
            if when <= now:
                del self._retry[name]
                self._renew(n)

    def _start_due(self) -> bool:
        """Starts the failed nodes whose backoff is over, then restarts the live holders of
        any that moved to another machine; False when one cannot be started."""
        now = time.monotonic()
        due = [n for n, when in self._due.values() if when <= now]
        if not due:
            return True
        for n in due:
            del self._due[n.name]
        moved = [n for n in due if n.host is None]
        unplaced = self._place_again(moved)  # every move bound before any pickle is made
        if unplaced:
            return self._cannot_start(*unplaced)
        for n in due:
            try:
                self._start_again(n)
            except (ray.exceptions.RayError, TimeoutError) as err:
                return self._cannot_start(n, err)
        for n in due:
            self._renew(n)
        ok = self._restart_holders(moved, started=due)
        # A placement may take a while: the other calls were not late meanwhile.
        self._pending = {r: (m, time.monotonic()) for r, (m, _) in self._pending.items()}
        return ok

    def _failed(self, n: _Node, why: str, host_lost: bool) -> bool:
        """Records a node's exit or loss; True when it will be started again (after its
        backoff, `config.restart`), False when it ends the program."""
        cause = self._record(n, why)
        failures.annotate_failure(self._run_dir, n.name, n.describe())
        if n.failures >= self._max_restarts:
            self._say(f"{n.name} {cause} on {n.machine()}; stopping the program")
            return False
        delay = supervisor.restart_delay(self._backoff, n.failures)
        n.failures += 1
        self._restarted(n, cause, delay)
        self._retry.pop(n.name, None)
        if host_lost:  # a host that only stopped answering must not run a second copy
            with contextlib.suppress(ray.exceptions.RayError, ValueError):
                ray.kill(n.host, no_restart=True)
            self._retired.append(n.host)
            n.host = None
        where = "on another machine" if host_lost else "on the same host"
        holders = ", ".join(h.name for h in n.holders) if host_lost else ""
        self._say(
            f"{n.name} {cause} on {n.machine()}; starting it again {where} in {delay:.1f} s "
            f"(restart {n.failures} of {self._max_restarts})"
            + (f", then the nodes that hold its address: {holders}" if holders else "")
        )
        self._due[n.name] = (n, time.monotonic() + delay)
        return True

    def _restarted(self, n: _Node, cause: str, delay: float) -> None:
        """Counts a start of `n` to come and lists it (result.json, the summary); its
        failure report moves to failures/restarted/."""
        n.attempt += 1
        at = time.time() - self._began
        entry = supervisor.record_restart(self._run_dir, n.name, n.attempt, cause, at, delay)
        self.restarts.append({**entry, "host": n.machine()})

    def _place_again(self, moved: list[_Node], timeout_s: float = _PLACEMENT_TIMEOUT_S):
        """New hosts for nodes whose Ray node was lost (or actors added), placed by the
        cluster with their group's options, their addresses bound to the new machine's
        new ports. Returns None, or (a node, why) when one was not placed within
        `timeout_s`.

        Ray learns that a machine is gone only when its health checks give up (about
        12 s here), while the watch calls to its hosts fail at once: until then it may
        put a new host on that very machine, where it dies with it. Such a host is
        replaced by another until the time is up.
        """
        deadline = time.monotonic() + timeout_s
        waiting = {}
        for n in moved:
            n.host = self._new_host(n)
            waiting[n.host.locate.remote(len(n.node.addresses))] = n
        while waiting:
            left = deadline - time.monotonic()
            ready, _ = ray.wait(list(waiting), num_returns=1, timeout=max(left, 0))
            if not ready:
                n = next(iter(waiting.values()))
                why = f"not placed within {timeout_s:.0f} s ({n.options})"
                return n, TimeoutError(why)
            n = waiting.pop(ready[0])
            try:
                n.where = ray.get(ready[0])
            except ray.exceptions.RayActorError as err:
                self._say(f"{n.name}'s new host died ({type(err).__name__}); placing it again")
                self._retired.append(n.host)
                time.sleep(_SIGNAL_POLL_S)  # not a busy loop if every new host dies at once
                n.host = self._new_host(n)
                waiting[n.host.locate.remote(len(n.node.addresses))] = n
                continue
            for address, port in zip(n.node.addresses, n.where["ports"]):
                address.bind(staging.HostPortAddress(n.where["ip"], port))
        return None

    def _start_again(self, n: _Node) -> None:
        """Starts a failed node on its host (a new pickle: handles as bound now)."""
        start = n.host.start.remote(self._pickled(n), self._envs[n.label], n.output, n.attempt)
        n.where["pid"] = ray.get(start, timeout=_RPC_TIMEOUT_S)
        self._write_placement()
        self._say(f"{n.name} started again on {n.machine()}, pid {n.where['pid']}")

    def _cannot_start(self, n: _Node, err: Exception) -> bool:
        """Records that `n` could not be started again; False (the program stops)."""
        self._say(f"{n.name} could not be started again ({type(err).__name__}); stopping")
        self._record(n, f"could not be started again: {err}".splitlines()[0])
        return False

    def _restart_holders(self, moved: list[_Node], started: list[_Node]) -> bool:
        """Restarts, on their own hosts, the running nodes that hold a handle to a node in
        `moved` (but not those just `started`, or waiting to be): their pickles carry its
        old address, so each starts from one made now (the learner from its checkpoint, as
        after any restart). They stop as at the end of a run (SIGTERM: the learner writes
        its final checkpoint), all at once. Not counted against their own `config.restart`
        (they did not fail), but listed, with the cause. False when one cannot be
        restarted and that ends the program."""
        causes = {}
        for m in moved:
            for h in m.holders:
                if h.host is not None and h.name not in self._due and h not in started:
                    causes.setdefault(h.name, (h, []))[1].append(f"{m.name} moved to {m.machine()}")
        if not causes:
            return True
        grace = supervisor.termination_notice_secs()
        refs = {}
        for h, why in causes.values():
            cause = "restarted: " + "; ".join(why)
            failures.record_failure(self._run_dir, h.name, cause)
            self._restarted(h, cause, 0.0)
            self._pending = {r: v for r, v in self._pending.items() if v[0] is not h}
            self._retry.pop(h.name, None)
            payload = self._pickled(h)
            ref = h.host.restart.remote(payload, self._envs[h.label], h.output, h.attempt, grace)
            refs[ref] = h
            self._say(f"{h.name} on {h.machine()} {cause}")
        ray.wait(list(refs), num_returns=len(refs), timeout=grace + _RPC_TIMEOUT_S)
        ok = True
        for ref, h in refs.items():
            try:
                h.where["pid"] = ray.get(ref, timeout=0.1)
            except (ray.exceptions.RayError, TimeoutError) as err:
                lost = f"its Ray node was lost ({type(err).__name__})"
                ok = self._failed(h, lost, host_lost=True) and ok
                continue
            self._say(f"{h.name} started again on {h.machine()}, pid {h.where['pid']}")
            self._renew(h)
        self._write_placement()
        return ok

    def _actor_nodes(self) -> list[_Node]:
        return [n for n in self._nodes if n.label == "actor"]

    def _machine_left(self, n: _Node) -> bool:
        """Whether Ray counts `n`'s machine dead (its node table as last read)."""
        return self._node_alive.get((n.where or {}).get("ray_node")) is False

    def _follow(self, force: bool = False) -> None:
        """`config.ray.actors="auto"`: when Ray's alive nodes changed since the last look
        (every _NODES_READ_S; at once with `force`), the actors whose machine left are
        removed and the count goes to `follow_count` of the alive nodes (or, below
        `ray.min_actors`, stays at what is left); one line of actors.log, cause "cluster"."""
        now = time.monotonic()
        if not self._auto or (not force and now - self._followed < _NODES_READ_S):
            return
        self._followed = now
        try:
            table = ray.nodes()
        except Exception:  # noqa: BLE001 - the GCS may be slow; read it next time
            return
        self._node_alive = {m["NodeID"]: m["Alive"] for m in table}
        self._nodes_read = now
        alive = frozenset(m["NodeID"] for m in table if m["Alive"])
        if alive == self._alive_seen and not force:
            return
        self._alive_seen = alive
        left = [n.name for n in self._actor_nodes() if self._machine_left(n)]
        try:
            count = follow_count(self._config, [m["Resources"] for m in table if m["Alive"]])
        except ConfigError as err:
            count = len(self._actor_nodes()) - len(left)
            self._say(f"{err}; the run goes on with the {count} actors left")
        try:
            change = self._scale_to(count, "cluster", None, first_out=left)
        except Exception as err:  # noqa: BLE001 - a failed start must not end the run
            self._say(f"actors not added as the cluster grew: {type(err).__name__}: {err}")
            if not left:
                return
            change = self._scale_to(len(self._actor_nodes()) - len(left), "cluster", None, left)
        if change.added or change.removed:
            scaling.note(self._run_dir, change, time.time() - self._began, self._say)

    def _scale_to(self, count: int, cause: str, ident, first_out=()) -> scaling.Change:
        """Goes to `count` actors (`scaling.plan`; `first_out` removed first): the new
        ones placed, started and watched first, then the removed ones stopped. Raises
        ConfigError when the cluster cannot hold `count` actors (`check_fits` on its
        alive nodes), another error when the new ones could not be started (nothing
        changed then)."""
        if self._actors.maker is None:
            raise RuntimeError("this program has no actor maker (it cannot add actors)")
        actors = [n.name for n in self._actor_nodes()]
        busy = [scaling.index(n.name) for n in self._removing.values()]
        removed, ids = scaling.plan(count, actors, busy, first_out)
        if ids:
            sized = self._config.copy_and_resolve_references()
            sized.num_actors = count
            scaling.check_count(self._config, count, local=False)
            check_fits(sized, _alive_nodes())
            added = self._add_actors(ids, count)
        else:
            added = []
        self._remove_actors(removed)
        return scaling.Change(
            len(actors) - len(removed) + len(added), len(actors), added, removed, cause, ident
        )

    def _add_actors(self, ids: list[int], count: int) -> list[str]:
        """Actors `ids` of `count` (`topology.ActorMaker.added`: a new seed each, the
        exploration of its place among `count`), placed with the actor group's options,
        bound, started and watched; their names. Raises (their hosts killed) when one is
        not placed within _SCALE_PLACEMENT_S or does not start."""
        new = []
        for i in ids:
            s = staging.stage_added(self._actors.maker.added(i, count), "actor", i)
            output = staging.output_path(self._actors.output_dir, s)
            new.append(_Node(s.name, "actor", s.node, dict(self._actors.options), output))
        try:
            unplaced = self._place_again(new, _SCALE_PLACEMENT_S)
            if unplaced:
                raise unplaced[1]
            starts = [
                n.host.start.remote(self._pickled(n), self._envs["actor"], n.output) for n in new
            ]
            pids = ray.get(starts, timeout=_RPC_TIMEOUT_S)
        except BaseException:
            for n in new:
                with contextlib.suppress(ray.exceptions.RayError, ValueError, TypeError):
                    ray.kill(n.host, no_restart=True)
            raise
        for n, pid in zip(new, pids):
            n.where["pid"] = pid
            for m in self._nodes:
                if staging.holds(n.node, m.node):
                    m.holders.append(n)
            self._nodes.append(n)
            self._renew(n)
            self._say(f"{n.name} started on {n.machine()}, pid {pid}")
        self._write_placement()
        # The placement may have taken a while: the other calls were not late meanwhile.
        self._pending = {r: (m, time.monotonic()) for r, (m, _) in self._pending.items()}
        return [n.name for n in new]

    def _remove_actors(self, names: list[str]) -> None:
        """Stops the actors `names` as at the end of a run (SIGTERM: each ends its rollout
        and write; SIGKILL after the termination notice), without waiting (`_reap`); they
        are no longer watched, restarted or counted."""
        grace = supervisor.termination_notice_secs()
        for name in names:
            n = next(m for m in self._nodes if m.name == name)
            self._nodes.remove(n)
            self._pending = {r: v for r, v in self._pending.items() if v[0] is not n}
            self._due.pop(name, None)
            self._retry.pop(name, None)
            for m in self._nodes:
                if n in m.holders:
                    m.holders.remove(n)
            if n.host is not None:
                self._removing[n.host.stop.remote(grace)] = n
        if names:
            self._write_placement()

    def _reap(self, timeout_s: float = 0.0) -> None:
        """Kills the hosts of removed actors whose node has ended, saying how it ended."""
        if not self._removing:
            return
        refs = list(self._removing)
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=timeout_s)
        for ref in ready:
            n = self._removing.pop(ref)
            try:
                code = ray.get(ref)
                how = nodeproc.exit_cause(code) if code is not None else "not running"
            except ray.exceptions.RayError as err:
                how = f"its host is gone ({type(err).__name__})"
            with contextlib.suppress(ray.exceptions.RayError, ValueError):
                ray.kill(n.host, no_restart=True)
            self._say(f"{n.name} removed: {how}")

    def _stop(self) -> None:
        """Stops every node (SIGTERM, then SIGKILL) and kills every host actor.

        In local_mp's order (`supervisor.stop_phases`): the actors and the evaluator,
        then the learner, whose final checkpoint of Reverb's tables needs the replay
        up, then the rest. Within a phase the hosts stop their nodes at once.
        """
        placed = [n for n in self._nodes if n.host is not None and n.where is not None]
        grace = supervisor.termination_notice_secs()
        start = time.time()
        self._reap(grace + _RPC_TIMEOUT_S)  # removed actors still ending: theirs first
        self._retired += [n.host for n in self._removing.values()]
        for phase in supervisor.stop_phases([n.name for n in placed]):
            self._stop_phase([n for n in placed if n.name in phase], grace, start)
        for host in [n.host for n in self._nodes if n.host is not None] + self._retired:
            with contextlib.suppress(ray.exceptions.RayError, ValueError):
                ray.kill(host, no_restart=True)

    def _stop_phase(self, placed: list, grace: float, start: float) -> None:
        refs = [n.host.stop.remote(grace) for n in placed]
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

    def _record(self, n: _Node, why: str) -> str:
        """The failure report of a node that exited or was lost (`nodeproc.record_exit`);
        returns its first line."""
        return nodeproc.record_exit(self._run_dir, n.name, why, n.output)

    def _say(self, text: str) -> None:
        """A line in the terminal (above the progress line) and in the launcher's log."""
        logging.info("distrl: %s", text)
        if self._line is not None:
            self._line.note(f"distrl: {text}")

    def _report_failures(self) -> None:
        """Adds the host each failed node ran on to its failure report."""
        for n in self._nodes:
            failures.annotate_failure(self._run_dir, n.name, n.describe())
