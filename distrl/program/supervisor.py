"""Stage 7, on this machine: distrl's own `local_mp` launcher, which supervises the nodes.

Launchpad's `local_mp` launcher stops the program when a node dies, without
naming it, and its nodes outlive a killed launcher. This one keeps Launchpad's
nodes, handles, address binding, pickling and entry point (`staging`,
`nodeproc`, shared with the Ray launcher) and owns the processes:

1. Start: every node runs in a child process (`nodeproc.NodeProcess`) that dies
   with this launcher however it dies (PR_SET_PDEATHSIG), servers on loopback
   only (`bindhost`), output in `<run_dir>/logs/nodes/<group>/<i>`; a fork of the
   preloaded parent (`zygote`, the learning stack imported once), or a fresh
   interpreter when that parent cannot serve.
2. Watch (the main thread, every 0.1 s): a node's `lp.stop()` touches the stop
   file (`lifecycle.stop_via_file`) and ends the watch; a node that exits non-zero
   (an exception, a signal, a native abort) is named with its cause in
   `failures/<node>.txt` and, while `config.restart.max_per_node` allows, started
   again after a backoff (`backoff_seconds`, doubled per restart of that node), its
   report moved to `failures/restarted/`; otherwise the program stops.
3. Scale (`scaling`): a request for N actors in the work directory
   (`launch/scale.py`) starts actors (new ids' nodes, made by the program's
   `more_actors`) or stops the newest ones (SIGTERM: each ends its rollout and
   write, and exits; SIGKILL after the termination notice); each change is one
   line of `<run_dir>/actors.log`, as is the launch.
4. Stop: on the stop file, a failure, Ctrl-C, SIGTERM or SIGHUP every node gets
   SIGTERM (actors and evaluator first, then the learner, then replay and counter,
   so that the learner's final checkpoint finds Reverb up), and a node still
   running `--lp_termination_notice_secs` after its SIGTERM gets a stack dump and
   SIGKILL (named in logs/nodes/launcher).

Every restart is listed in result.json (`restarts`) and the final summary.
"""

import contextlib
import os
import shutil
import signal
import time

from absl import flags

from distrl.program import bindhost, nodeproc, ports, progress, scaling, staging, zygote
from distrl.program.ray import STOP_FILE_ENV
from distrl.records import failures, rundir

_POLL_S = 0.1
# Stopped first, one group after another; then the rest (replay, counter): the
# learner's final checkpoint asks the replay node for its tables and the counter
# for its totals, so both still run while it writes.
_STOP_ORDER = (("actor", "evaluator"), ("learner",))
RESTARTED_DIR = "restarted"  # under failures/: reports of nodes that were restarted


def stop_phases(names) -> list[list[str]]:
    """The node names in the order they stop (`_STOP_ORDER`, then every other node)."""
    ordered = [[n for n in names if n.split("/")[0] in labels] for labels in _STOP_ORDER]
    return ordered + [[n for n in names if not any(n in phase for phase in ordered)]]


def termination_notice_secs() -> float:
    """Seconds a node gets between SIGTERM and SIGKILL (--lp_termination_notice_secs)."""
    try:
        return float(flags.FLAGS.lp_termination_notice_secs)
    except (flags.UnparsedFlagAccessError, AttributeError):
        return 10.0


@contextlib.contextmanager
def stop_signals_interrupt():
    """SIGTERM and SIGHUP to the launcher stop the program as Ctrl-C does."""

    def interrupt(signum, frame):
        del signum, frame
        raise KeyboardInterrupt

    previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def stop_signals_ignored():
    """Ctrl-C, SIGTERM and SIGHUP ignored for the block: a second signal must not cut
    the stop of every node short and leave some running (seen on Ray: a Ctrl-C that
    arrived while the nodes were being stopped left four of them behind)."""
    signals = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in signals}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def restart_delay(backoff_seconds: float, attempt: int) -> float:
    """Seconds before the restart of a node whose `attempt`-th start (0: the first) died."""
    return backoff_seconds * 2**attempt


def record_restart(
    run_dir: str, name: str, restart: int, cause: str, at_seconds: float, delay: float
) -> dict:
    """The `restart`-th restart of node `name` (1: its first): its failure report moves to
    failures/restarted/ (it no longer ends the run); returns its entry for result.json."""
    report = os.path.join(
        run_dir, failures.FAILURES_DIR, RESTARTED_DIR, f"{name.replace('/', '_')}-{restart}.txt"
    )
    os.makedirs(os.path.dirname(report), exist_ok=True)
    os.replace(failures.failure_path(run_dir, name), report)
    return {
        "node": name,
        "cause": cause,
        "restart": restart,
        "at_seconds": round(at_seconds, 1),
        "backoff_seconds": round(delay, 1),
        "report": report,
    }


def run(
    program, config, run_dir: str, envs: dict, stream, terminal: str, show_progress: bool = True
) -> list[dict]:
    """Runs `program` with a process per node until it stops; returns the restarts made.

    `envs` maps each group to its node processes' environment variables; `terminal`
    "output_to_files" (output per node, one progress line on `stream`) or
    "current_terminal" (every node's output here, prefixed with its name). Only
    `config.restart` is read, and with `show_progress` what the progress line shows.
    """
    output_dir = rundir.node_output_dir(run_dir)
    os.makedirs(output_dir, exist_ok=True)
    work = scaling.open_work_dir(run_dir, "local_mp")
    supervisor = _Supervisor(config, run_dir, os.path.join(output_dir, "launcher"), stream)
    try:
        supervisor.prepare(program, envs, output_dir, work, terminal == "current_terminal")
        show = show_progress and terminal == "output_to_files"
        line = progress.ProgressLine(run_dir, config, stream) if show else contextlib.nullcontext()
        supervisor.run(line)
    finally:
        supervisor.close()
        shutil.rmtree(work, ignore_errors=True)
    return supervisor.restarts


class _Supervisor:
    """Starts, watches, restarts and stops the node processes of one program."""

    def __init__(self, config, run_dir: str, log_path: str, stream):
        self._run_dir = run_dir
        self._max_restarts = config.restart.max_per_node
        self._backoff = config.restart.backoff_seconds
        self._log_path = log_path
        self._stream = stream
        self._nodes: dict[str, nodeproc.NodeProcess] = {}
        self._stop_file = ""
        self._start = time.time()
        self._line = None
        self._zygote: zygote.Zygote | None = None
        self.restarts: list[dict] = []
        self._pending: dict[str, float] = {}  # name -> when to start it again
        self._scaler: _Scaler | None = None
        self._ports = ports.Claims()  # no other launcher here is given them

    def prepare(self, program, envs: dict, output_dir: str, work: str, echo: bool) -> None:
        """Contexts, handles, loopback ports and pickles of every node, and the preloaded
        parent started (its imports overlap the pickling) or, when the entry point
        started it early (`zygote.start_early`), adopted; no node runs yet."""
        self._stop_file = os.path.join(work, "stop")
        loopback = bindhost.environment(bindhost.LOOPBACK)
        staged = staging.stage(program)
        node_env = {
            n.name: {**os.environ, **envs[n.label], **loopback, STOP_FILE_ENV: self._stop_file}
            for n in staged
        }
        self._scaler = _Scaler(
            getattr(program, "more_actors", None),
            dict(work=work, output_dir=output_dir, echo=echo),
            {**os.environ, **envs.get("actor", {}), **loopback, STOP_FILE_ENV: self._stop_file},
            self._ports,
        )
        early = zygote.take_early()
        if early is None:
            self._zygote = self._start_zygote(list(node_env.values()))
        for n in staged:
            staging.bind_local(n.node, self._ports)
            data_file = os.path.join(work, n.name.replace("/", "_") + ".pkl")
            with open(data_file, "wb") as f:
                f.write(staging.pickled(n, work))
            self._nodes[n.name] = nodeproc.NodeProcess(
                data_file,
                node_env[n.name],
                staging.output_path(output_dir, n),
                prefix=f"{n.label}/{n.index}" if echo else None,
                zygote=self._zygote,
                name=n.name,
            )
        if early is not None:
            self._zygote = self._adopt(early, list(node_env.values()))
            for node in self._nodes.values():
                node.zygote = self._zygote
        self._scaler.zygote = self._zygote

    def _start_zygote(self, envs: list[dict]) -> "zygote.Zygote | None":
        """The preloaded parent, with what every node's environment shares (the bind
        shim included); None when turned off."""
        if zygote.turned_off():
            self._log(f"{zygote.PRELOAD_ENV}=off: nodes start the plain way")
            return None
        with open(self._log_path, "ab") as output:  # its own output: rare, in this log
            return zygote.Zygote(zygote.common_environment(envs), self._log, output)

    def _adopt(self, early: zygote.Zygote, envs: list[dict]) -> "zygote.Zygote | None":
        """The parent started early, once its imports are done, if it fits the nodes'
        environment; else a new one (`_start_zygote`)."""
        if early.adopt(self._log, zygote.common_environment(envs)):
            return early
        return self._start_zygote(envs)

    def close(self) -> None:
        """Ends the preloaded parent (after the nodes' stop: it has none left) and gives
        the ports back."""
        if self._zygote is not None:
            self._zygote.close()
        self._ports.release()

    def run(self, line) -> None:
        try:
            for name, p in self._nodes.items():
                self._log(f"{name} started, pid {p.start()}")
            if self._scaler.scalable:
                actors = sorted(n for n in self._nodes if n.startswith("actor/"))
                launch = scaling.Change(len(actors), 0, actors, [], "launch")
                scaling.record(self._run_dir, launch, 0.0)
            with line, stop_signals_interrupt():
                self._line = line if isinstance(line, progress.ProgressLine) else None
                try:
                    self._watch()
                except KeyboardInterrupt:
                    self._log("interrupted; stopping every node")
        finally:
            self._line = None
            with stop_signals_ignored():
                self._stop()

    def _watch(self) -> None:
        """Returns once a node asked to stop, a node failed for good, or every node exited."""
        pending = self._pending
        while not os.path.exists(self._stop_file):
            self._scale()
            for name, p in self._nodes.items():
                code = p.poll()
                if code is None or code == 0 or name in pending:
                    continue
                cause = nodeproc.record_exit(
                    self._run_dir, name, nodeproc.exit_cause(code), p.output_path
                )
                if p.attempt >= self._max_restarts:
                    self._say(f"{name} {cause}; stopping the program")
                    return
                pending[name] = time.monotonic() + restart_delay(self._backoff, p.attempt)
                self._restarted(name, p, cause, pending[name] - time.monotonic())
            for name in [n for n, when in pending.items() if when <= time.monotonic()]:
                del pending[name]
                self._log(f"{name} restarted, pid {self._nodes[name].start()}")
            if not pending and all(p.poll() == 0 for p in self._nodes.values()):
                return
            time.sleep(_POLL_S)

    def _restarted(self, name: str, p, cause: str, delay: float) -> None:
        """Records a restart: its report moves to failures/restarted/, the list grows."""
        at = time.time() - self._start
        self.restarts.append(record_restart(self._run_dir, name, p.attempt + 1, cause, at, delay))
        self._say(
            f"{name} {cause}; restarting it in {delay:.1f} s "
            f"(restart {p.attempt + 1} of {self._max_restarts})"
        )

    def _scale(self) -> None:
        """Serves a pending scale request (one line in actors.log and the terminal) and
        ends the actors removed earlier once they exited (SIGKILL past their notice)."""
        for line in self._scaler.reap(termination_notice_secs()):
            self._log(line)
        scaling.serve(
            self._scaler.where["work"],
            self._run_dir,
            time.time() - self._start,
            lambda count, cause, ident: self._scaler.apply(
                count, cause, ident, self._nodes, self._pending, self._log
            ),
            lambda: sum(n.startswith("actor/") for n in self._nodes),
            self._say,
        )

    def _stop(self) -> None:
        grace = termination_notice_secs()
        self._log(f"stopping every node (SIGKILL after {grace:g} s)")
        for name, p in self._scaler.removing.items():  # removed, still ending: first
            self._nodes.setdefault(name, p)
        killed = nodeproc.stop_all(self._nodes, grace, stop_phases(self._nodes))
        if killed:
            self._log(
                f"did not terminate in time: {killed}; their stacks are in their output; killed"
            )
        for name, p in self._nodes.items():
            self._log(f"{name} ended: {nodeproc.exit_cause(p.poll() or 0)}")

    def _say(self, text: str) -> None:
        """A line in the terminal (above the progress line) and in the launcher's log."""
        self._log(text)
        if self._line is not None:
            self._line.note(f"distrl: {text}")
        else:
            print(f"distrl: {text}", file=self._stream, flush=True)

    def _log(self, text: str) -> None:
        with open(self._log_path, "a") as f:
            now = time.time()  # to the millisecond: start-up and stop phases take 0.1-1 s
            stamp = time.strftime("%H:%M:%S", time.localtime(now))
            f.write(f"{stamp}.{int(now % 1 * 1000):03d} {text}\n")


class _Scaler:
    """Adds and removes the actor nodes of a running program (`_Supervisor._scale`).

    Which to add and remove is `scaling.plan`'s (ids stay 0..N-1); each added actor
    gets a new seed (it starts from its share of the run's env steps,
    `topology.ActorMaker.added`). A removed actor gets SIGTERM at once and is
    `removing` until it exits (SIGKILL after the termination notice).
    """

    def __init__(self, more_actors, where: dict, env: dict, claims: ports.Claims):
        self._more = more_actors  # topology.ActorMaker, or None (a program without actors)
        self.where = where  # work, output_dir, echo
        self._env = env
        self._ports = claims
        self.zygote = None
        self.removing: dict[str, tuple] = {}  # name -> (NodeProcess, SIGKILL deadline)

    @property
    def scalable(self) -> bool:
        """Whether the program can make more actors (a distrl program: `topology`)."""
        return self._more is not None

    def apply(self, count: int, cause: str, ident, nodes: dict, pending: dict, log):
        """Goes to `count` actors (`scaling.plan`): the removed get SIGTERM now; returns
        the change."""
        if not self.scalable:
            raise RuntimeError("this program has no actor maker (it cannot add actors)")
        actors = [n for n in nodes if n.startswith("actor/")]
        removed, ids = scaling.plan(count, actors, busy=map(scaling.index, self.removing))
        for name in removed:
            p = nodes.pop(name)
            pending.pop(name, None)
            p.terminate()
            self.removing[name] = (p, None)
        added = []
        for index in ids:
            name = self._start(index, count, nodes)
            log(f"{name} started, pid {nodes[name].process.pid}")
            added.append(name)
        return scaling.Change(
            len(actors) - len(removed) + len(added), len(actors), added, removed, cause, ident
        )

    def _start(self, index: int, count: int, nodes: dict) -> str:
        """Stages, binds, pickles and starts actor `index` of `count`; its name."""
        n = staging.stage_added(self._more.added(index, count), "actor", index)
        staging.bind_local(n.node, self._ports)
        data_file = os.path.join(self.where["work"], n.name.replace("/", "_") + ".pkl")
        with open(data_file, "wb") as f:
            f.write(staging.pickled(n, self.where["work"]))
        p = nodeproc.NodeProcess(
            data_file,
            self._env,
            staging.output_path(self.where["output_dir"], n),
            prefix=f"{n.label}/{n.index}" if self.where["echo"] else None,
            zygote=self.zygote,
            name=n.name,
        )
        p.start()
        nodes[n.name] = p
        return n.name

    def reap(self, grace_s: float) -> list[str]:
        """Log lines for the removed actors that exited (SIGKILL to those past `grace_s`)."""
        lines = []
        for name, (p, deadline) in list(self.removing.items()):
            if deadline is None:
                self.removing[name] = (p, time.monotonic() + grace_s)
            elif p.poll() is None and time.monotonic() > deadline:
                p.dump_and_kill()
                lines.append(f"{name} did not end in time after its removal; killed")
            if p.poll() is not None:
                del self.removing[name]
                lines.append(f"{name} removed: {nodeproc.exit_cause(p.poll())}")
        return lines
