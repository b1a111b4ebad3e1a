"""A preloaded parent for `local_mp` node processes: the learning stack imported once,
then one `fork()` per node start.

A fresh node process spends seconds of CPU importing TensorFlow (for Reverb), JAX,
Launchpad and distrl's nodes before it runs a line of its own (docs/decisions.md,
"distrl supervises its own node processes"). The local supervisor instead starts one
process, the preloaded parent (`serve`, run by `_BOOTSTRAP`), which imports that
stack and then forks a child per node start and restart. The child applies its
node's environment and output, makes itself die with the parent, and runs
Launchpad's `process_entry.py` on the node's pickle, as a plain start does.

Forking is safe because the parent never creates what does not survive a fork: no
thread (counted after the imports and before each fork: it forks only with one; the
thread pools NumPy's and SciPy's OpenBLAS start at load stop themselves at a fork),
no XLA backend, TensorFlow context, gRPC channel or server; those are created by each node,
after the fork. Of the environment, the child can only change what is read after
the fork (`FORKABLE_ENV`, and JAX_PLATFORMS and TF_CPP_MIN_LOG_LEVEL, which JAX reads
at import, set again in the child); a node whose environment differs from the
parent's in anything else is started the plain way. LD_PRELOAD (the bind shim) acts
at exec, so the parent itself is started with the nodes' shim.

`launch/train.py` does not start the parent as a second interpreter when it can help
it: a launcher whose environment is the parent's (but for what a fork applies)
executes itself again with the shim if it lacks it, then, its own imports done (they
are the parent's), forks the parent (`fork_early`): the stack is imported once per
run, not twice.

The supervisor (`Zygote`) and the parent talk over a Unix SOCK_SEQPACKET pair: one
JSON message each way per event; the node's output file (or echo pipe) travels as a
file descriptor. The parent reports each child's pid and its exit status, and reaps
an exited child only when the supervisor has seen its exit, so a pid the supervisor
signals is never one the kernel could have given to another process. The chain of
parent-death signals: a node dies with the preloaded parent, the parent with the
launcher. When the parent cannot start, refuses, or dies, nodes are started the
plain way (`nodeproc`), and the launcher's log says so.
"""

import contextlib
import ctypes
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback

from distrl import exits

PRELOAD_ENV = "DISTRL_PRELOAD"  # "off": every node starts the plain way


def turned_off() -> bool:
    """Whether $DISTRL_PRELOAD turns the preloaded parent off."""
    return os.environ.get(PRELOAD_ENV, "").lower() == "off"


# What the parent imports before it serves: what every node's pickle needs, and
# Launchpad's entry script's own imports (the script itself runs in each child:
# its flag definitions must happen once per process).
PRELOAD = (
    "absl.app",
    "absl.flags",
    "absl.logging",
    "cloudpickle",
    "courier",
    "jax",
    "launchpad",
    "launchpad.launch.worker_manager",
    "reverb",
    "six",
    "tensorflow",
    "distrl.program.topology",
)

# Environment variables read only when first used, after a node's imports (at
# backend, thread-pool or server creation, or on each call): setting them in the
# child before the node runs is as good as exec'ing with them.
FORKABLE_ENV = frozenset(
    {
        "XLA_FLAGS",  # XLA parses it when JAX creates its first backend
        "TF_NUM_INTRAOP_THREADS",  # TensorFlow reads both at its first context
        "TF_NUM_INTEROP_THREADS",
        "CUDA_VISIBLE_DEVICES",  # read by the CUDA driver at its initialization
        "TMPDIR",  # tempfile's cached choice is cleared in the child
        "DISTRL_NODE_PARENT_PID",  # nodeproc's, read by the bootstrap / the child
        "DISTRL_NODE_ATTEMPT",  # nodes.lifecycle.attempt(), on each call
        "DISTRL_STOP_FILE",  # lifecycle.stop_via_file, on each call
        "DISTRL_BIND_HOST",  # the bind shim reads it at each bind()
    }
)
# JAX reads JAX_PLATFORMS into its config at import; the child sets the config.
_JAX_PLATFORMS = "JAX_PLATFORMS"
# JAX reads TF_CPP_MIN_LOG_LEVEL at import too (its default for jax_logging_level),
# which the child sets again; TensorFlow's and XLA's C++ logging read it at their first
# message, and importing the stack logs none (tests/test_zygote.py checks).
_TF_LOG_LEVEL = "TF_CPP_MIN_LOG_LEVEL"

_PR_SET_PDEATHSIG = 1
_PR_SET_NAME = 15
_MAX_MESSAGE = 1 << 20
_CHILD_POLL_S = 0.05  # how often the parent looks for exited children
_READY_TIMEOUT_S = 120.0  # its imports: seconds of CPU, far longer on a loaded machine

# Run by `python -c` with the socket's fd: dies with the launcher from its first line,
# like a plain node; ignores Ctrl-C and hang-ups (the launcher answers those with an
# orderly stop of every node, which must find this process alive).
_BOOTSTRAP = f"""
import ctypes, os, signal, sys
ctypes.CDLL(None).prctl({_PR_SET_PDEATHSIG}, signal.SIGKILL)
if os.getppid() != int(sys.argv[2]):
    sys.exit(1)
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGHUP, signal.SIG_IGN)
from distrl.program import zygote
zygote.main(int(sys.argv[1]))
"""


class Unavailable(Exception):
    """The preloaded parent cannot fork this node (or any more): start it the plain way."""


def _send(sock, message: dict, fds=()) -> None:
    socket.send_fds(sock, [json.dumps(message).encode()], list(fds))


def _receive(sock) -> tuple[dict | None, list]:
    """(message, fds), or (None, []) when the other side closed."""
    data, fds, _, _ = socket.recv_fds(sock, _MAX_MESSAGE, 1)
    return (json.loads(data) if data else None), fds


def _status_code(info) -> int:
    """A waitid result as Popen.returncode: the exit code, or -signal."""
    if info.si_code == os.CLD_EXITED:
        return info.si_status
    return -info.si_status


def thread_count() -> int:
    """This process's threads, as the kernel counts them (native ones included)."""
    return len(os.listdir("/proc/self/task"))


# ---- the preloaded parent's side ----


def main(fd: int) -> None:
    """The preloaded parent's program; in a forked child, that child's node."""
    node = _serve(socket.socket(fileno=fd))
    if node is not None:
        _become_node(node)  # never returns: the child exits when its node does
    # Served (or refused): nothing to tear down that the kernel does not take back,
    # and the supervisor waits for this exit (Python's own teardown is slow).
    exits.now(0)


def _serve(sock) -> dict | None:
    """Imports the stack, then forks a child per start request until the supervisor
    closes the socket. Returns None in the parent at the end; in a child, its request
    (the child then leaves this loop, and the parent's stack, behind)."""
    try:
        import importlib  # noqa: PLC0415

        for name in PRELOAD:
            importlib.import_module(name)
    except Exception as err:  # noqa: BLE001 - any failure means: start nodes the plain way
        _send(sock, {"refused": f"import failed: {type(err).__name__}: {err}"})
        return None
    _probe_fork()
    threads = thread_count()
    if threads != 1:  # a fork copies one thread: a lock another one held would stay held
        _send(sock, {"refused": f"{threads} threads after its imports; forking needs 1"})
        return None
    # Its environment as the imports left it (TensorFlow sets variables of its own):
    # what each node's environment is compared with.
    _send(sock, {"ready": os.getpid(), "env": dict(os.environ)})
    live: set[int] = set()  # forked, exit not yet reported
    exited: set[int] = set()  # exit reported, not yet reaped
    while True:
        readable, _, _ = select.select([sock], [], [], _CHILD_POLL_S)
        if readable:
            message, fds = _receive(sock)
            if message is None:
                break
            if "start" in message and thread_count() != 1:
                os.close(fds[0])
                _send(sock, {"started": None, "why": f"{thread_count()} threads"})
            elif "start" in message:
                parent = os.getpid()
                pid = os.fork()
                if pid == 0:
                    sock.close()
                    return {**message["start"], "out_fd": fds[0], "parent": parent}
                os.close(fds[0])
                live.add(pid)
                _send(sock, {"started": pid})
            elif "reap" in message:
                pid = message["reap"]
                if pid in exited:
                    os.waitpid(pid, 0)
                    exited.discard(pid)
        for pid in list(live):
            # WNOWAIT: the child stays a zombie (its pid taken) until the supervisor,
            # which may still signal it, has seen this and asks for the reap.
            info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            if info is not None:
                live.discard(pid)
                exited.add(pid)
                _send(sock, {"exited": pid, "code": _status_code(info)})
    # The supervisor is done with us: it stopped every node; make sure of it.
    for pid in live:
        os.kill(pid, signal.SIGKILL)
    for pid in live | exited:
        os.waitpid(pid, 0)
    return None


def _probe_fork() -> None:
    """Forks a child that exits at once. NumPy's and SciPy's OpenBLAS start their thread
    pools when loaded and stop them in a pthread_atfork handler, before every fork
    (starting them again at the next BLAS call, which this process never makes): after
    this fork the count of threads says whether anything else runs beside the main one."""
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)


def _become_node(node: dict) -> None:
    """In the forked child: the node's guarantees, environment and output, then
    Launchpad's entry script on its pickle (what `nodeproc._BOOTSTRAP` does after exec)."""
    libc = ctypes.CDLL(None)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != node["parent"]:  # the parent died before the call above
        os._exit(1)
    libc.prctl(_PR_SET_NAME, node["name"][:15].encode(), 0, 0, 0)  # ps/top tell nodes apart
    _apply_environment(node["env"])
    os.dup2(node["out_fd"], 1)
    os.dup2(node["out_fd"], 2)
    os.close(node["out_fd"])
    import faulthandler  # noqa: PLC0415
    import runpy  # noqa: PLC0415

    faulthandler.register(signal.SIGUSR1, all_threads=True)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a fresh interpreter
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    sys.argv = list(node["argv"])
    try:
        runpy.run_path(sys.argv[0], run_name="__main__")
        code = 0
    except SystemExit as done:
        code = exits.status(done.code)
    except KeyboardInterrupt:
        code = -signal.SIGINT
    except BaseException:  # noqa: BLE001 - reported as the interpreter would, then exit 1
        traceback.print_exc()
        code = 1
    _exit(code)


def _exit(code: int) -> None:
    """Ends the child as the interpreter's exit does, in its order (non-daemon threads
    joined, atexit handlers, standard streams flushed), but without its teardown of
    every module: in a process holding TensorFlow and JAX that takes over a second of
    CPU, frees only memory the kernel takes back anyway, and can make a stopped node
    outlive Launchpad's 1 s SIGALRM (then die by it). multiprocessing's forked
    children end with os._exit too."""
    import atexit  # noqa: PLC0415

    try:
        threading._shutdown()  # noqa: SLF001 - what Py_FinalizeEx calls first
        atexit._run_exitfuncs()  # noqa: SLF001
    finally:
        if code == -signal.SIGINT:  # an uncaught Ctrl-C: die by the signal, as Python does
            exits.flush()
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        exits.now(code & 0xFF)


def _apply_environment(env: dict) -> None:
    """The node's environment, as exec would give it (for what is read after the fork)."""
    import tempfile  # noqa: PLC0415

    platforms = env.get(_JAX_PLATFORMS)
    changed = platforms != os.environ.get(_JAX_PLATFORMS)
    log_level = env.get(_TF_LOG_LEVEL)
    log_level_changed = log_level != os.environ.get(_TF_LOG_LEVEL)
    os.environ.clear()
    os.environ.update(env)
    tempfile.tempdir = None  # chosen again from TMPDIR when first needed
    if changed:
        sys.modules["jax"].config.update("jax_platforms", platforms)
    jax_logging = sys.modules.get("jax._src.logging_config")
    if log_level_changed and hasattr(jax_logging, "_default_TF_CPP_MIN_LOG_LEVEL"):
        jax_logging._default_TF_CPP_MIN_LOG_LEVEL = log_level or "1"  # noqa: SLF001 - as at import


# ---- the supervisor's side ----


def differences(base: dict, env: dict) -> list[str]:
    """Names whose value in `env` differs from `base`'s and that a fork cannot apply."""
    names = set(base) | set(env)
    allowed = FORKABLE_ENV | {_JAX_PLATFORMS, _TF_LOG_LEVEL}
    return sorted(n for n in names if base.get(n) != env.get(n) and n not in allowed)


def common_environment(envs: list[dict]) -> dict:
    """The variables every one of `envs` sets to the same value: the parent's own."""
    if not envs:
        return {}
    first, *rest = envs
    return {k: v for k, v in first.items() if all(e.get(k) == v for e in rest)}


class ForkedProcess:
    """A node forked by the preloaded parent, with the part of Popen's interface that
    `nodeproc.NodeProcess` uses (pid, poll, wait, send_signal, kill, stdout)."""

    def __init__(self, zygote: "Zygote", pid: int, stdout=None):
        self._zygote = zygote
        self.pid = pid
        self.stdout = stdout  # the echo pipe's read end, or None

    def poll(self) -> int | None:
        return self._zygote.exit_code(self.pid)

    def wait(self, timeout: float | None = None) -> int:
        code = self._zygote.wait(self.pid, None if timeout is None else time.monotonic() + timeout)
        if code is None:
            raise subprocess.TimeoutExpired(f"node pid {self.pid}", timeout)
        return code

    def send_signal(self, sig: int) -> None:
        self._zygote.signal(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class Zygote:
    """The supervisor's handle on the preloaded parent: starts it, forks nodes through
    it, learns their exits. Every call is from the supervisor's main thread or holds
    the lock."""

    def __init__(self, env: dict, log, output, keep_output: bool = False, fork: bool = False):
        """Starts the parent (its imports run while the supervisor goes on) with `env`
        (every node's shared environment), its output to the file object `output`;
        `log(text)` is the launcher's log. `keep_output`: `output` is a temp file whose
        text goes to the log when the parent is closed. `fork`: the parent is a fork of
        this process, which imported the stack already (`fork_early`), not a new
        interpreter."""
        self.env = env
        self._log = log
        self._output = output if keep_output else None
        self._lock = threading.RLock()
        self._exits: dict[int, int] = {}
        self._forked: set[int] = set()
        self._ready = False
        self._down = False
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._sock = ours
        if fork:
            try:
                self._process = _ForkedParent(theirs, env, output)
                self._log(
                    f"preloaded parent pid {self.pid}: a fork of the launcher, its imports done"
                )
            except OSError as err:
                self._process = None
                self._give_up(f"could not fork ({err})")
            finally:
                theirs.close()
            return
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-c", _BOOTSTRAP, str(theirs.fileno()), str(os.getpid())],
                env=env,
                pass_fds=[theirs.fileno()],
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
            )
        except OSError as err:
            self._process = None
            self._give_up(f"could not start ({err})")
        finally:
            theirs.close()

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    def available(self) -> bool:
        return not self._down

    def fork(self, name: str, argv: list, env: dict, out_fd: int, stdout=None) -> ForkedProcess:
        """A child of the parent running node `name` (`argv`: Launchpad's entry script and
        its flags) with `env`, its output to `out_fd` (this process keeps its own copy).
        Raises Unavailable when the parent cannot: the caller starts it the plain way."""
        with self._lock:
            if self._down:
                raise Unavailable("the preloaded parent is not running")
            if not self._ready:
                self._await_ready()
            unforkable = differences(self.env, env)
            if unforkable:
                why = f"its environment differs from the preloaded parent's in {unforkable}"
                self._log(f"{name} starts the plain way: {why}")
                raise Unavailable(why)
            request = {"name": name, "argv": list(argv), "env": env}
            try:
                _send(self._sock, {"start": request}, [out_fd])
                message = self._next(lambda m: "started" in m, time.monotonic() + 30.0)
            except OSError as err:
                self._give_up(f"lost ({err})")
                message = None
            if message is None or message["started"] is None:
                why = "no answer" if message is None else message["why"]
                self._log(f"{name} starts the plain way: the preloaded parent did not ({why})")
                raise Unavailable(why)
            self._forked.add(message["started"])
            return ForkedProcess(self, message["started"], stdout)

    def exit_code(self, pid: int) -> int | None:
        with self._lock:
            self._drain(0.0)
            return self._exits.get(pid)

    def wait(self, pid: int, deadline: float | None) -> int | None:
        """The exit code of `pid` once it exited, else None at `deadline` (monotonic)."""
        while True:
            with self._lock:
                timeout = 0.1 if deadline is None else min(0.1, deadline - time.monotonic())
                self._drain(max(timeout, 0.0))
                if pid in self._exits or (deadline is not None and time.monotonic() >= deadline):
                    return self._exits.get(pid)

    def signal(self, pid: int, sig: int) -> None:
        """Signals a forked node that has not exited; its pid is still its own (not reaped)."""
        with self._lock:
            self._drain(0.0)
            if pid not in self._exits:
                os.kill(pid, sig)

    def adopt(self, log, env: dict) -> bool:
        """Takes over a parent started early (`start_early`) for nodes whose shared
        environment is `env`: `log` gets its messages from now on (and those it had).
        Waits for its imports. False, with the parent closed, when it did not come up
        or its environment differs from `env` in what a fork cannot apply."""
        with self._lock:
            early_log, self._log = self._log, log
            for line in early_log.lines:
                log(line)
            try:
                if not self._down and not self._ready:
                    self._await_ready()
            except Unavailable:
                pass
            unforkable = [] if self._down else differences(self.env, env)
            if unforkable:
                log(
                    f"preloaded parent (pid {self.pid}), started early, does not fit: "
                    f"its environment differs from the nodes' in {unforkable}"
                )
            if self._down or unforkable:
                self.close()
                return False
            log(f"preloaded parent pid {self.pid}, started with the command, adopted")
            return True

    def close(self, timeout: float = 10.0) -> None:
        """Ends the parent (it kills any node still running) and waits for it."""
        with self._lock:
            self._down = True
            self._sock.close()
            if self._process is not None:
                try:
                    self._process.wait(timeout)
                except subprocess.TimeoutExpired:
                    self._process.kill()
                    self._process.wait()
            if self._output is not None:  # started early: its output was kept aside
                self._output.seek(0)
                text = self._output.read().decode(errors="replace").strip()
                self._output.close()
                self._output = None
                if text:
                    self._log(f"preloaded parent's output:\n{text}")

    def _await_ready(self) -> None:
        """Waits for the parent's imports; a refusal or a silence means plain starts."""
        try:
            message = self._next(
                lambda m: "ready" in m or "refused" in m, time.monotonic() + _READY_TIMEOUT_S
            )
        except OSError as err:
            message = {"refused": f"lost ({err})"}
        if message is None or "refused" in message:
            why = "no answer" if message is None else message["refused"]
            self._give_up(f"refused to serve: {why}")
            raise Unavailable(why)
        self._ready = True
        self.env = message["env"]
        self._log(f"preloaded parent ready, pid {self.pid}: nodes start as its forks")

    def _next(self, wanted, deadline: float) -> dict | None:
        """Reads messages (recording exits) until one `wanted`; None at the deadline or
        when the parent is gone."""
        while not self._down:
            timeout = deadline - time.monotonic()
            if timeout <= 0:
                return None
            readable, _, _ = select.select([self._sock], [], [], timeout)
            if not readable:
                continue
            message, _ = _receive(self._sock)
            if message is None:
                self._lost()
                return None
            if wanted(message):
                return message
            self._handle(message)
        return None

    def _drain(self, timeout: float) -> None:
        """Handles every message already sent (waiting up to `timeout` for the first)."""
        while not self._down:
            readable, _, _ = select.select([self._sock], [], [], timeout)
            if not readable:
                return
            timeout = 0.0
            try:
                message, _ = _receive(self._sock)
            except OSError:
                message = None
            if message is None:
                self._lost()
                return
            self._handle(message)

    def _handle(self, message: dict) -> None:
        if "exited" in message:
            pid = message["exited"]
            self._exits[pid] = message["code"]
            try:
                _send(self._sock, {"reap": pid})  # seen: from now on it is never signalled
            except OSError:
                self._lost()

    def _lost(self) -> None:
        """The parent died: its nodes died with it (their parent-death signal, SIGKILL)."""
        code = self._process.wait() if self._process is not None else None
        for pid in self._forked - set(self._exits):
            self._exits[pid] = -signal.SIGKILL
        self._give_up(f"exited with code {code}; its nodes were killed with it")

    def _give_up(self, why: str) -> None:
        if not self._down:
            self._down = True
            self._log(f"preloaded parent (pid {self.pid}) {why}; nodes start the plain way")


# ---- started early, by the launcher's entry point ----


class _EarlyLog:
    """A started-early parent's log lines, kept until the supervisor adopts it."""

    def __init__(self):
        self.lines: list[str] = []

    def __call__(self, text: str) -> None:
        self.lines.append(text)


_early: Zygote | None = None


def start_early(env: dict) -> None:
    """Starts the preloaded parent now, with `env`, the environment every node will
    share as far as it is known before the launcher's own imports: its imports then
    run beside the launcher's instead of after them.
    The supervisor adopts it (`take_early`, `Zygote.adopt`); a launcher that ends
    first (a bad flag, a crash) takes it along by its parent-death signal."""
    global _early
    if _early is None:
        _early = Zygote(env, _EarlyLog(), tempfile.TemporaryFile(), keep_output=True)
        exits.before_exit(discard_early)


def fork_early(env: dict) -> None:
    """Forks the preloaded parent from this process, the launcher, whose imports are
    done (they are the parent's: no interpreter imports the stack a second time), with
    `env`, as `start_early`'s. This process must have been started with what the
    parent's environment needs at exec and import (`unforkable_here` of it, before the
    imports, empty). It forks only with one thread (after `_probe_fork`); when it
    cannot, or an import fails, the parent starts as `start_early` starts it."""
    global _early
    if _early is not None:
        return
    try:
        import importlib  # noqa: PLC0415

        for name in PRELOAD:  # the launcher's own imports hold them all (cheap if so)
            importlib.import_module(name)
    except Exception:  # noqa: BLE001 - the started parent says why in the launcher's log
        start_early(env)
        return
    _probe_fork()
    if thread_count() != 1:
        start_early(env)
        return
    _early = Zygote(env, _EarlyLog(), tempfile.TemporaryFile(), keep_output=True, fork=True)
    exits.before_exit(discard_early)


def unforkable_here(env: dict) -> list[str]:
    """The names in which `env` differs from this process's environment that a fork
    of this process cannot apply (`differences`), LD_PRELOAD only when one of the
    libraries it names is not loaded here: empty when a parent forked from this
    process, after its imports, is the parent `env` would start."""
    unfit = differences(dict(os.environ), env)
    if "LD_PRELOAD" in unfit and _preloaded_here(env.get("LD_PRELOAD", "")):
        unfit.remove("LD_PRELOAD")
    return unfit


def _preloaded_here(preload: str) -> bool:
    """Whether every library of an LD_PRELOAD value is loaded in this process."""
    try:
        with open("/proc/self/maps") as f:
            loaded = {line.split()[-1] for line in f if "/" in line}
    except OSError:
        return False
    names = preload.replace(":", " ").split()
    return all(os.path.realpath(name) in loaded for name in names)


class _ForkedParent:
    """The preloaded parent as a fork of this process, with the part of Popen's
    interface `Zygote` uses (pid, wait, kill)."""

    def __init__(self, sock, env: dict, output):
        exits.flush()  # nothing buffered here is written twice
        launcher = os.getpid()
        self.returncode = None
        self.pid = os.fork()
        if self.pid == 0:
            try:
                _forked_parent(sock, env, output.fileno(), launcher)
            except BaseException:  # noqa: BLE001 - said in its output, which the log gets
                traceback.print_exc()
                exits.flush()
            finally:
                os._exit(1)

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            pid, status = os.waitpid(self.pid, 0 if deadline is None else os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
            elif time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(f"preloaded parent pid {self.pid}", timeout)
            else:
                time.sleep(0.01)
        return self.returncode

    def kill(self) -> None:
        if self.returncode is None:
            os.kill(self.pid, signal.SIGKILL)


def _forked_parent(sock, env: dict, out_fd: int, launcher: int) -> None:
    """In the fork of the launcher: what `_BOOTSTRAP` does in a new interpreter (dies
    with the launcher, ignores Ctrl-C and hang-ups), with the standard streams and
    open files a Popen child gets, and `env` as its environment; then `main`."""
    ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != launcher:
        os._exit(1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    exits._BEFORE_EXIT.clear()  # noqa: SLF001 - the launcher's, not this process's
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(out_fd, 1)
    os.dup2(out_fd, 2)
    keep = sock.detach()
    for fd in [int(name) for name in os.listdir("/proc/self/fd")]:
        if fd > 2 and fd != keep:  # the listing's own fd among them, closed already
            with contextlib.suppress(OSError):
                os.close(fd)
    _apply_environment(env)
    _retitle(_TITLE)
    main(keep)


_TITLE = "distrl.program.zygote"  # the forked parent's command line, as ps shows it


def _retitle(title: str) -> None:
    """Writes `title` over this process's command line (the launcher's, which the fork
    copied), as setproctitle(3) does, so that ps, pgrep and the benchmarks' monitor tell
    the parent (and the nodes it forks, which inherit it) from the launcher, as they
    did when it was started by `_BOOTSTRAP`. The title ends with a NUL and the rest is
    blanks: the kernel then shows the title alone. Left as it is when it has no room or
    cannot be read."""
    try:
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rpartition(b")")[2].split()
        start, end = int(fields[45]), int(fields[46])  # arg_start, arg_end (proc(5))
        data = title.encode() + b"\0"
        if len(data) >= end - start:
            return
        with open("/proc/self/mem", "r+b", buffering=0) as mem:
            mem.seek(start)
            mem.write(data.ljust(end - start, b" "))
    except (OSError, ValueError, IndexError):
        pass


def discard_early() -> None:
    """Ends a parent started early that nothing adopted (a refused launch): killed and
    reaped before this process exits, so that not even its zombie remains."""
    early = take_early()
    if early is not None:
        early.close(timeout=0.0)


def take_early() -> Zygote | None:
    """The parent `start_early` started, handed over once (None if none)."""
    global _early
    early, _early = _early, None
    return early
