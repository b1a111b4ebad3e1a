"""Shared test helpers: configs loaded from configs/*.py, launching launch/train.py as a
user does (in its own process session, so that every process it started can be
checked for afterwards), and a clean CPU setup."""

import contextlib
import json
import os
import pathlib
import select
import signal
import subprocess
import sys
import time

import cpu_profile
import leftovers
import psutil
import pytest
import workers

from distrl import cli, compile_cache
from distrl.records import rundir

ROOT = pathlib.Path(__file__).resolve().parent.parent
TRAIN = [sys.executable, str(ROOT / "launch" / "train.py")]

# The suite compiles the same functions in many processes: distrl's cache, as a run uses.
compile_cache.enable()
# Runs draw no plots at their end (about a CPU second each); the plots' tests turn them
# on around their runs (`drawing_plots`).
os.environ[rundir.PLOTS_ENV] = "off"


@contextlib.contextmanager
def drawing_plots():
    """Runs started inside draw their plots at their end, as they do by default."""
    os.environ.pop(rundir.PLOTS_ENV)
    try:
        yield
    finally:
        os.environ[rundir.PLOTS_ENV] = "off"


# Tests stop runs as a user does, with Ctrl-C (SIGINT). A suite started in the background
# of a non-interactive shell inherits SIGINT ignored, and every launcher it started would
# too (an ignored signal stays ignored across exec): the runs would never stop.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def load_config(name: str):
    """The ml_collections config of configs/<name>.py, as the launcher loads it."""
    return cli.load_file(name)


def pytest_addoption(parser):
    cpu_profile.add_option(parser)


def pytest_configure(config):
    leftovers.install(config)
    cpu_profile.install(config)


def pytest_xdist_auto_num_workers(config):
    """`-n auto` (make test): by the cores free when the suite starts (tests/workers.py).
    A hook of conftest's own: xdist asks before plugins registered at configure exist."""
    n, config.distrl_workers = workers.decide()
    return n


def pytest_report_header(config):
    return getattr(config, "distrl_workers", None)


@pytest.fixture
def run_dir(tmp_path):
    return str(tmp_path / "run")


def launch_train(args, executable_args=None, **kwargs) -> subprocess.Popen:
    """launch/train.py (or `executable_args`, a script of the test's own) with `args`,
    in a new session, output (stdout + stderr) piped."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")
    command = [sys.executable, *executable_args] if executable_args else TRAIN
    return subprocess.Popen(
        command + args,
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        **kwargs,
    )


def session_processes(sid: int):
    """Live processes of one session (the launcher's and every node it started)."""
    alive = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if os.getsid(proc.pid) == sid and proc.status() != psutil.STATUS_ZOMBIE:
                alive.append(proc)
        except (ProcessLookupError, psutil.NoSuchProcess):
            pass
    return alive


def assert_nothing_left(proc):
    """Every process of the launcher's session has exited (killing stragglers to report them)."""
    deadline = time.time() + 15
    while session_processes(proc.pid) and time.time() < deadline:
        time.sleep(0.5)
    left = session_processes(proc.pid)
    for p in left:
        p.kill()
    assert not left, [p.cmdline() for p in left]


def node_pids(run_dir) -> dict:
    """{node name: pid of its latest start}, from the launcher's log ("X started, pid N",
    "X restarted, pid N"): a node forked by the preloaded parent keeps that parent's
    command line, so the log is what names each process."""
    log = run_dir / "logs" / "nodes" / "launcher"
    pids = {}
    for line in log.read_text().splitlines() if log.exists() else []:
        words = line.split()
        if len(words) == 5 and words[2] in ("started,", "restarted,") and words[3] == "pid":
            pids[words[1]] = int(words[4])
    return pids


def descendants(launcher_pid: int) -> dict:
    return {p.pid: p for p in psutil.Process(launcher_pid).children(recursive=True)}


def wait_while_running(proc, deadline: float, ready, why=None, period_s: float = 0.5):
    """Polls `ready()` until it gives something true, which it returns, failing if the
    launcher `proc` ended or `deadline` passed first (with `why`, else its output)."""
    while not (found := ready()):
        if proc.poll() is not None or time.time() >= deadline:
            # the output only now: communicate() waits for the launcher to end
            raise AssertionError(why if why is not None else proc.communicate()[0][-3000:])
        time.sleep(period_s)
    return found


def kill_node_when(proc, run_dir, node: str, ready, within_s: float, then_s: float):
    """Once `ready()` holds (within `within_s`) and node `node` ("actor/0", "replay") of
    the launcher `proc` is alive, SIGKILLs that node, then waits up to `then_s` for the
    launcher to end: (its output, the time of the kill). A failure on the way kills the
    launcher, so nothing outlives the test."""
    try:
        victim = wait_while_running(
            proc,
            time.time() + within_s,
            lambda: ready() and node_process(proc.pid, run_dir, node),
            period_s=0.1,
        )
        victim.send_signal(signal.SIGKILL)
        killed_at = time.time()
        out, _ = proc.communicate(timeout=then_s)
    finally:
        if proc.poll() is None:
            proc.kill()
    return out, killed_at


def node_process(launcher_pid: int, run_dir, name: str):
    """The live process of node `name` ("actor/0", "replay") of a launcher, or None."""
    pid = node_pids(run_dir).get(name)
    try:
        node = descendants(launcher_pid).get(pid)
        return node if node is not None and node.status() != psutil.STATUS_ZOMBIE else None
    except psutil.NoSuchProcess:
        return None


def listening_addresses(processes) -> dict:
    """{pid: {listening TCP address ips}} of these psutil processes (those still alive).

    psutil reads this network namespace's socket tables; a process in another one
    (a Ray node in its own namespace) is asked through `nsenter ... ss` instead.
    """
    found = {}
    here = os.readlink("/proc/self/ns/net")
    for p in processes:
        try:
            if os.readlink(f"/proc/{p.pid}/ns/net") != here:
                found[p.pid] = _listening_in_netns(p.pid)
                continue
            found[p.pid] = {
                c.laddr.ip for c in p.net_connections("tcp") if c.status == psutil.CONN_LISTEN
            }
        except (OSError, psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return found


def _listening_in_netns(pid: int) -> set:
    done = subprocess.run(
        ["nsenter", "-t", str(pid), "-n", "ss", "-ltnpH"],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:  # the process (and its namespace's last user) just exited
        return set()
    ips = set()
    out = done.stdout
    for line in out.splitlines():
        if f"pid={pid}," in line:
            local = line.split()[3]  # "[::ffff:10.0.0.2]:4321", "10.0.0.2:4321", "*:4321"
            ips.add(local.rsplit(":", 1)[0].strip("[]"))
    return ips


# Runs a distrl program once per line of stdin ([target, args, output file]) in a
# forked child of this warm interpreter, so that each run does not import JAX and
# TensorFlow anew (5 s of CPU each): the child is its own session and runs the
# target as `python TARGET ARGS` (a script path) or `python -m TARGET ARGS` (a
# module name) would, output to the file; prints "RAN [pid, exit status]".
_FORK_RUNNER = """
import json, os, runpy, sys
import jax  # noqa: F401 - imported once, before the forks
from distrl import checkpoints, cli, config, resources  # noqa: F401
from distrl.analysis import plots  # noqa: F401
try:  # the distributed layer, where it is installed (not on the core's stack)
    import launchpad  # noqa: F401
    import reverb  # noqa: F401 - TensorFlow with it (distrl's own imports leave it out)
    from distrl.program import launcher  # noqa: F401
except ImportError:
    pass
for line in sys.stdin:
    target, args, out = json.loads(line)
    pid = os.fork()
    if pid == 0:
        os.setsid()
        fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        sys.argv, code = [target, *args], 0
        try:
            if target.endswith(".py"):
                runpy.run_path(target, run_name="__main__")
            else:
                runpy.run_module(target, run_name="__main__", alter_sys=True)
        except SystemExit as exit:
            code = exit.code if isinstance(exit.code, int) else int(exit.code is not None)
            if isinstance(exit.code, str):
                print(exit.code, file=sys.stderr)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    print("RAN", json.dumps([pid, status]), flush=True)
"""


class WarmPython:
    """`run(target, *args)`: a distrl program run as a user runs it, forked from one
    interpreter that imported JAX, distrl and (where installed) TensorFlow and Launchpad
    once."""

    def __init__(self, scratch: pathlib.Path):
        self._scratch, self._runs, self._pending = scratch, 0, ""
        self._proc = launch_train([], executable_args=["-c", _FORK_RUNNER], stdin=subprocess.PIPE)

    def run(self, target: str, *args: str, timeout: float = 300.0):
        """(exit status, output, pid) of `python TARGET ARGS` (`-m TARGET` for a module)."""
        self._runs += 1
        out = self._scratch / f"run{self._runs}.txt"
        self._proc.stdin.write(json.dumps([target, list(args), str(out)]) + "\n")
        self._proc.stdin.flush()
        deadline, fd = time.time() + timeout, self._proc.stdout.fileno()
        while (ran := self._take_ran_line()) is None:  # other lines: import warnings
            ready, _, _ = select.select([fd], [], [], max(deadline - time.time(), 0))
            if not ready:
                raise TimeoutError(f"{target} {args} ran past {timeout} s")
            chunk = os.read(fd, 65536)
            if not chunk:
                raise RuntimeError("the warm interpreter exited")
            self._pending += chunk.decode()
        pid, code = ran
        return code, out.read_text(), pid

    def evaluated(self, run_dir, episodes: int) -> dict:
        """The JSON figures `launch/evaluate.py --json` prints for `run_dir`'s policy
        over `episodes` episodes (asserting it exits 0)."""
        code, out, _ = self.run(
            "launch/evaluate.py", f"--run_dir={run_dir}", f"--episodes={episodes}", "--json"
        )
        assert code == 0, out[-2000:]
        return json.loads(next(line for line in reversed(out.splitlines()) if line[:1] == "{"))

    def _take_ran_line(self):
        """[pid, status] of the first whole "RAN" line read, dropping what came before."""
        lines = self._pending.splitlines(keepends=True)
        for i, line in enumerate(lines):
            if line.startswith("RAN ") and line.endswith("\n"):
                self._pending = "".join(lines[i + 1 :])
                return json.loads(line[len("RAN ") :])
        return None

    def close(self):
        self._proc.stdin.close()
        try:
            self._proc.wait(timeout=60)
        finally:
            assert_nothing_left(self._proc)


@pytest.fixture(scope="session")
def warm_python(tmp_path_factory):
    runner = WarmPython(tmp_path_factory.mktemp("warm"))
    yield runner
    runner.close()


os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
