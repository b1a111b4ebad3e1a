"""One Launchpad node in a child process: start, watch, name its exit, stop.

Shared by both launchers that run nodes as processes: the local supervisor
(`distrl.program.supervisor`, `local_mp`) and the Ray node host
(`distrl.program.ray.nodehost`). A node runs Launchpad's own `process_entry.py` on
its pickled function, as Launchpad's `local_mp` runs it, through a small bootstrap
that makes it die with whoever started it:

- `prctl(PR_SET_PDEATHSIG, SIGKILL)`, set in the child after exec (a `preexec_fn`
  is unsafe in a threaded parent), then a check that the parent is still the one
  that started it (it may have died before the call). The signal fires when the
  parent THREAD that forked the child exits, so `start` must be called from a
  thread that lives as long as the launcher (its main thread).
- `faulthandler` on SIGUSR1: `stop` dumps every thread's stack of a node that
  missed the stop before killing it, even when its main thread sits in native code
  (a Python-level handler would never run there).
- SIGHUP ignored: a closed terminal hangs up its whole process group, nodes
  included; the launcher alone answers it, with an orderly stop.

Under `local_mp` a node is a fork of the supervisor's preloaded parent
(`distrl.program.zygote`: the learning stack imported once) rather than a fresh
interpreter, with the same guarantees; `zygote=None` (the Ray node host, or once the
preloaded parent is gone) starts it the plain way described here.

Imports neither Launchpad nor the learning stack: a Ray node host imports it.
"""

import importlib.util
import os
import signal
import subprocess
import sys
import threading
import time

from distrl.nodes.lifecycle import ATTEMPT_ENV
from distrl.program import zygote as zygote_lib
from distrl.records import failures

PARENT_PID_ENV = "DISTRL_NODE_PARENT_PID"
_PR_SET_PDEATHSIG = 1
_DUMP_WAIT_S = 1.0

_BOOTSTRAP = f"""
import ctypes, faulthandler, os, runpy, signal, sys
ctypes.CDLL(None).prctl({_PR_SET_PDEATHSIG}, signal.SIGKILL)
if os.getppid() != int(os.environ["{PARENT_PID_ENV}"]):
    sys.exit(1)
faulthandler.register(signal.SIGUSR1, all_threads=True)
signal.signal(signal.SIGHUP, signal.SIG_IGN)
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def process_entry() -> str:
    """Launchpad's entry script for a pickled node (what `local_mp` runs), on this machine."""
    package_dir = importlib.util.find_spec("launchpad").submodule_search_locations[0]
    return os.path.join(package_dir, "nodes", "python", "process_entry.py")


def exit_cause(code: int) -> str:
    """'exited with code -9 (killed by SIGKILL)', 'exited with code 1'."""
    if code < 0:
        try:
            return f"exited with code {code} (killed by {signal.Signals(-code).name})"
        except ValueError:
            return f"exited with code {code} (killed by signal {-code})"
    return f"exited with code {code}"


def output_tail(path: str, lines: int = 20) -> str:
    """The last `lines` lines of a node's output file ('' if unreadable)."""
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""


def record_exit(run_dir: str, name: str, cause: str, output_path: str, tail_lines: int = 20) -> str:
    """Names how node `name` ended (`cause`: a signal, an exit code, a lost host) in its
    failure report: after the exception it wrote itself, or, for a node that could not
    write one, with the last lines of its output. Returns the report's first line."""
    own = failures.read_failure(run_dir, name)
    if own is not None:
        first, _, rest = own.partition("\n")
        text = f"{first} ({cause})\n{rest}"
    else:
        tail = output_tail(output_path, tail_lines)
        text = f"{cause}\n\nlast output ({output_path}):\n{tail}"
    failures.record_failure(run_dir, name, text)
    return failures.summary(text)


class NodeProcess:
    """A node's child process; `start` again after it exited to restart it.

    Output goes to the file `output_path` (appended), or with `prefix` to this
    process's stdout, each line prefixed "[prefix] " (the debugging terminal mode).
    """

    def __init__(
        self,
        data_file: str,
        env: dict,
        output_path: str,
        prefix: str | None = None,
        first_attempt: int = 0,
        zygote: "zygote_lib.Zygote | None" = None,
        name: str = "node",
    ):
        self.data_file = data_file
        self.zygote = zygote
        self.name = name
        self.env = env
        self.output_path = output_path
        self.prefix = prefix
        self.process: subprocess.Popen | zygote_lib.ForkedProcess | None = None
        self.attempt = first_attempt - 1  # start() counts up: first_attempt on the first

    def start(self) -> int:
        """Starts (or restarts) the node; returns its PID."""
        self.attempt += 1
        argv = [process_entry(), f"--data_file={self.data_file}", "--lp_task_id=0"]
        os.makedirs(os.path.dirname(self.output_path), exist_ok=True)
        self.process = None
        if self.zygote is not None and self.zygote.available():
            self.process = self._fork(argv)
        if self.process is None:
            self.process = self._spawn(argv)
        if self.prefix:
            threading.Thread(
                target=self._echo, args=(self.process,), daemon=True, name=f"output-{self.prefix}"
            ).start()
        return self.process.pid

    def _environment(self, parent_pid: int) -> dict:
        return {**self.env, PARENT_PID_ENV: str(parent_pid), ATTEMPT_ENV: str(self.attempt)}

    def _spawn(self, argv: list) -> subprocess.Popen:
        """The plain start: a fresh interpreter runs the bootstrap, then the entry script."""
        with open(self.output_path, "ab") as out:
            return subprocess.Popen(
                [sys.executable, "-c", _BOOTSTRAP, *argv],
                env=self._environment(os.getpid()),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE if self.prefix else out,
                stderr=subprocess.STDOUT,
            )

    def _fork(self, argv: list):
        """A fork of the preloaded parent, output to the same file (or an echo pipe);
        None when it cannot (the caller starts the node the plain way)."""
        env = self._environment(self.zygote.pid)
        try:
            if self.prefix:
                read, write = os.pipe()
                stdout = os.fdopen(read, "rb")
                try:
                    return self.zygote.fork(self.name, argv, env, write, stdout)
                except zygote_lib.Unavailable:
                    stdout.close()
                    raise
                finally:
                    os.close(write)  # the child holds its copy: EOF comes when it exits
            with open(self.output_path, "ab") as out:
                return self.zygote.fork(self.name, argv, env, out.fileno())
        except zygote_lib.Unavailable:
            return None

    def _echo(self, process) -> None:
        for line in iter(process.stdout.readline, b""):
            sys.stdout.write(f"[{self.prefix}] {line.decode(errors='replace')}")
            sys.stdout.flush()

    def poll(self) -> int | None:
        """The exit code once the process has exited, else None (None before any start)."""
        return None if self.process is None else self.process.poll()

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def terminate(self) -> None:
        if self.running():
            self.process.send_signal(signal.SIGTERM)

    def wait(self, deadline: float) -> bool:
        """Waits until `deadline` (time.monotonic) for the exit; True if it exited."""
        if self.process is None:
            return True
        try:
            self.process.wait(max(deadline - time.monotonic(), 0.0))
            return True
        except subprocess.TimeoutExpired:
            return False

    def dump_and_kill(self) -> None:
        """Prints every thread's stack into the node's output, then SIGKILLs it."""
        if not self.running():
            return
        self.process.send_signal(signal.SIGUSR1)
        time.sleep(_DUMP_WAIT_S)
        if self.running():
            self.process.kill()
        self.process.wait()

    def stop(self, grace_seconds: float) -> int | None:
        """SIGTERM; after `grace_seconds` a stack dump and SIGKILL. Returns the exit code."""
        self.terminate()
        if not self.wait(time.monotonic() + grace_seconds):
            self.dump_and_kill()
        return self.poll()


def stop_all(processes: dict, grace_seconds: float, phases=()) -> list:
    """Stops {name: NodeProcess}; returns the names that had to be killed.

    `phases`: groups of names stopped one after another, each given up to
    `grace_seconds` (e.g. the learner before the replay, so that its final
    checkpoint of Reverb's tables finds the server up); the rest are stopped last.
    """
    rest = [n for n in processes if not any(n in phase for phase in phases)]
    killed = []
    for phase in [*phases, rest]:
        group = {n: processes[n] for n in phase if n in processes}
        for p in group.values():
            p.terminate()
        deadline = time.monotonic() + grace_seconds
        late = [name for name, p in group.items() if not p.wait(deadline)]
        for name in late:
            group[name].dump_and_kill()
        killed += late
    return killed
