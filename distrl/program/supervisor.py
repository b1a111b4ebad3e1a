"""Stage 7, on this machine: distrl's own `local_mp` launcher, which supervises the nodes.

Launchpad's `local_mp` launcher stops the program when a node dies, without naming it,
and its nodes outlive a killed launcher (docs/decisions.md, "distrl supervises its own
node processes"). This one keeps Launchpad's nodes, handles, address binding, pickling
and entry point (`staging`, `nodeproc`, shared with the Ray launcher) and owns the
processes (`run`):

1. Start: each node in a child process that dies with this launcher
   (`nodeproc.NodeProcess`), servers on loopback only (`bindhost`), output in
   `<run_dir>/logs/nodes/<group>/<i>`; a fork of the preloaded parent (`zygote`), or
   a fresh interpreter when that parent cannot serve.
2. Watch (the main thread, every 0.1 s): a node's `lp.stop()` touches the stop file
   (`lifecycle.stop_via_file`); a node that exits non-zero is named with its cause in
   `failures/<node>.txt` and restarted while `restarts` allows, else the program stops.
3. Scale (`scaling`): a `launch/scale.py` request starts or stops actors; each change
   is one line of `<run_dir>/actors.log`.
4. Stop: on the stop file, a failure, Ctrl-C, SIGTERM or SIGHUP, every node gets
   SIGTERM (`stopping.stop_phases`: actors and evaluator, the learner, then replay and
   counter, so the learner's final checkpoint finds Reverb up), and a stack dump and
   SIGKILL after `--lp_termination_notice_secs`.

Every restart is listed in result.json (`restarts`) and the final summary.
"""

import contextlib
import os
import shutil
import time

from distrl.program import (
    bindhost,
    nodeproc,
    ports,
    progress,
    restarts,
    scaling,
    staging,
    stopping,
    zygote,
)
from distrl.program.ray import STOP_FILE_ENV
from distrl.records import rundir

_POLL_S = 0.1


def run(
    program,
    config,
    run_dir: str,
    envs: dict,
    stream,
    terminal: str,
    show_progress: bool = True,
    output_dir: str | None = None,
    started=None,
) -> list[dict]:
    """Runs `program` with a process per node until it stops; returns the restarts made.

    `envs` maps each group to its node processes' environment variables; `terminal`
    "output_to_files" (output per node, one progress line on `stream`) or
    "current_terminal" (every node's output here, prefixed with its name). Only
    `config.restart` is read, and with `show_progress` what the progress line shows.
    `output_dir`: where the nodes' output goes (default: the run's `logs/nodes`);
    `started(stop_file)` is called once every node started: creating `stop_file`
    stops the program (`distrl.program.beside`).
    """
    output_dir = output_dir or rundir.node_output_dir(run_dir)
    os.makedirs(output_dir, exist_ok=True)
    work = scaling.open_work_dir(run_dir, "local_mp")
    supervisor = _Supervisor(config, run_dir, os.path.join(output_dir, "launcher"), stream)
    try:
        supervisor.prepare(program, envs, output_dir, work, terminal == "current_terminal")
        show = show_progress and terminal == "output_to_files"
        line = progress.ProgressLine(run_dir, config, stream) if show else contextlib.nullcontext()
        supervisor.run(line, started)
    finally:
        supervisor.close()
        shutil.rmtree(work, ignore_errors=True)
    return supervisor.policy.restarts


def _node_process(n: staging.Staged, env: dict, where: dict, parent) -> nodeproc.NodeProcess:
    """Node `n`'s process, not started yet: its pickle (addresses bound) in the work
    directory, its output in `where["output_dir"]` (or, with `where["echo"]`, here),
    forked from the preloaded `parent` when there is one."""
    data_file = os.path.join(where["work"], n.name.replace("/", "_") + ".pkl")
    with open(data_file, "wb") as f:
        f.write(staging.pickled(n, where["work"]))
    return nodeproc.NodeProcess(
        data_file,
        env,
        staging.output_path(where["output_dir"], n),
        prefix=f"{n.label}/{n.index}" if where["echo"] else None,
        zygote=parent,
        name=n.name,
    )


class _Supervisor:
    """Starts, watches, restarts and stops the node processes of one program."""

    def __init__(self, config, run_dir: str, log_path: str, stream):
        self._run_dir = run_dir
        self._log_path = log_path
        self._stream = stream
        self._nodes: dict[str, nodeproc.NodeProcess] = {}
        self._stop_file = ""
        self._start = time.time()
        self._line = None
        self._zygote: zygote.Zygote | None = None
        self.policy = restarts.RestartPolicy(config.restart, run_dir, self._start)
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
        where = dict(work=work, output_dir=output_dir, echo=echo)
        self._scaler = _Scaler(
            getattr(program, "more_actors", None),
            where,
            {**os.environ, **envs.get("actor", {}), **loopback, STOP_FILE_ENV: self._stop_file},
            self._ports,
        )
        early = zygote.take_early()
        if early is None:
            self._zygote = self._start_zygote(list(node_env.values()))
        for n in staged:  # all before any pickle: a node may hold a later node's handle
            staging.bind_local(n.node, self._ports)
        for n in staged:
            self._nodes[n.name] = _node_process(n, node_env[n.name], where, self._zygote)
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

    def run(self, line, started=None) -> None:
        try:
            for name, p in self._nodes.items():
                self._log(f"{name} started, pid {p.start()}")
            if started is not None:
                started(self._stop_file)
            if self._scaler.scalable:
                actors = sorted(n for n in self._nodes if n.startswith("actor/"))
                scaling.record_launch(self._run_dir, actors)
            with line, stopping.stop_signals_interrupt():
                self._line = line if isinstance(line, progress.ProgressLine) else None
                try:
                    self._watch()
                except KeyboardInterrupt:
                    self._log("interrupted; stopping every node")
        finally:
            self._line = None
            with stopping.stop_signals_ignored():
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
                restart = self.policy.after_failure(name, cause)
                if restart is None:
                    self._say(f"{name} {cause}; stopping the program")
                    return
                pending[name] = time.monotonic() + restart.delay
                self._say(
                    f"{name} {cause}; restarting it in {restart.delay:.1f} s ({restart.describe()})"
                )
            for name in [n for n, when in pending.items() if when <= time.monotonic()]:
                del pending[name]
                self._log(f"{name} restarted, pid {self._nodes[name].start()}")
            if not pending and all(p.poll() == 0 for p in self._nodes.values()):
                return
            time.sleep(_POLL_S)

    def _scale(self) -> None:
        """Serves a pending scale request (one line in actors.log and the terminal) and
        ends the actors removed earlier once they exited (SIGKILL past their notice)."""
        for line in self._scaler.reap(stopping.termination_notice_secs()):
            self._log(line)
        scaling.serve(
            self._scaler.where["work"],
            self._run_dir,
            time.time() - self._start,
            lambda count, cause, ident: self._scaler.apply(
                count, cause, ident, self._nodes, self._forget, self._log
            ),
            lambda: sum(n.startswith("actor/") for n in self._nodes),
            self._say,
        )

    def _forget(self, name: str) -> None:
        """Actor `name` was removed: no restart of it is due, its counts go."""
        self._pending.pop(name, None)
        self.policy.forget(name)

    def _stop(self) -> None:
        grace = stopping.termination_notice_secs()
        self._log(f"stopping every node (SIGKILL after {grace:g} s)")
        for name, p in self._scaler.removing.items():  # removed, still ending: first
            self._nodes.setdefault(name, p)
        killed = nodeproc.stop_all(self._nodes, grace, stopping.stop_phases(self._nodes))
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

    def apply(self, count: int, cause: str, ident, nodes: dict, forget, log):
        """Goes to `count` actors (`scaling.plan`): the removed get SIGTERM now (and
        `forget(name)` each); returns the change."""
        if not self.scalable:
            raise RuntimeError("this program has no actor maker (it cannot add actors)")
        actors = [n for n in nodes if n.startswith("actor/")]
        removed, ids = scaling.plan(count, actors, busy=map(scaling.index, self.removing))
        for name in removed:
            p = nodes.pop(name)
            forget(name)
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
        p = _node_process(n, self._env, self.where, self.zygote)
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
