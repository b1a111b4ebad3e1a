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

Imports neither Launchpad nor the learning stack: a Ray node host imports it.
"""

import importlib.util
import os
import signal
import subprocess
import sys
import threading
import time

PARENT_PID_ENV = "DISTRL_NODE_PARENT_PID"
ATTEMPT_ENV = "DISTRL_NODE_ATTEMPT"  # 0 for a node's first start, n for its n-th restart
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
    ):
        self.data_file = data_file
        self.env = env
        self.output_path = output_path
        self.prefix = prefix
        self.process: subprocess.Popen | None = None
        self.attempt = first_attempt - 1  # start() counts up: first_attempt on the first

    def start(self) -> int:
        """Starts (or restarts) the node; returns its PID."""
        self.attempt += 1
        env = {**self.env, PARENT_PID_ENV: str(os.getpid()), ATTEMPT_ENV: str(self.attempt)}
        command = [
            sys.executable,
            "-c",
            _BOOTSTRAP,
            process_entry(),
            f"--data_file={self.data_file}",
            "--lp_task_id=0",
        ]
        os.makedirs(os.path.dirname(self.output_path), exist_ok=True)
        with open(self.output_path, "ab") as out:
            self.process = subprocess.Popen(
                command,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE if self.prefix else out,
                stderr=subprocess.STDOUT,
            )
        if self.prefix:
            threading.Thread(
                target=self._echo, args=(self.process,), daemon=True, name=f"output-{self.prefix}"
            ).start()
        return self.process.pid

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
