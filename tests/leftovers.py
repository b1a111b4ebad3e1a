"""Nothing a test run starts outlives it: a pytest plugin (loaded by conftest.py).

The controlling pytest process (not an xdist worker) marks its environment, which every
worker, launcher, node, env copy and Ray process of the run inherits, and gives the run
a temporary directory of its own (`TMPDIR`: what Reverb's default checkpointers,
multiprocessing and pytest's `tmp_path` write under). After the run it checks, and a
leftover fails the run, naming what was left:
  - a live process that carries the mark (it waits for stragglers, then kills them);
  - a network namespace the run made (the Ray test cluster's, noted by `record`);
  - Ray's `ray_current_cluster` file naming a head the run made, which a later plain
    `ray.init()` would follow to a cluster that is gone.
Only what this run made counts, so that two runs may share the machine (CI runs the
Ray cluster tests beside the rest).
The run's temporary directory is removed after a green run, and kept (its path printed)
after a red one, for the failures' run directories.
"""

import os
import shutil
import subprocess
import sys
import tempfile
import time

import psutil

MARK = "DISTRL_TEST_RUN"  # environment variable: the run that started a process
# What the run made that outlives a process (a namespace, a Ray head's address), one
# "kind value" line each: the test helpers that make them say so through `record`.
_RECORD = "made.txt"
_RAY_CURRENT = "/tmp/ray/ray_current_cluster"
# A stopped run's processes exit within this (nodes end in 15 s); the plugin's own test
# sets it shorter.
_GRACE_S = float(os.environ.get("DISTRL_TEST_LEFTOVER_GRACE_S", "30"))


def record(kind: str, value: str) -> None:
    """Notes that this run made `value` (kind "netns" or "ray"): checked after the run.
    Outside a test run (a benchmark using the test cluster) there is nothing to note."""
    if MARK not in os.environ:
        return
    with open(os.path.join(tempfile.gettempdir(), _RECORD), "a") as f:
        f.write(f"{kind} {value}\n")


def _recorded(tmpdir: str, kind: str) -> set[str]:
    try:
        with open(os.path.join(tmpdir, _RECORD)) as f:
            return {v for k, _, v in (line.strip().partition(" ") for line in f) if k == kind}
    except FileNotFoundError:
        return set()


def _namespaces() -> set[str]:
    if not shutil.which("ip"):
        return set()
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def _ray_current() -> str | None:
    try:
        with open(_RAY_CURRENT) as f:
            return f.read().strip()
    except OSError:
        return None


def _remove_at_exit(path: str) -> None:
    """Removes `path` once this process ends. multiprocessing removes its own temporary
    directory (made under TMPDIR, so inside `path`) in a finalizer at exit: this one is
    queued after it (a lower exit priority), where multiprocessing is loaded at all."""
    util = sys.modules.get("multiprocessing.util")
    if util is None:
        shutil.rmtree(path, ignore_errors=True)
        return
    util.Finalize(
        None, shutil.rmtree, args=(path,), kwargs={"ignore_errors": True}, exitpriority=-200
    )


def _own_helper(proc: psutil.Process) -> bool:
    """This process's own multiprocessing forkserver or resource tracker (a test run
    without xdist starts them in the controlling process): they end when it exits."""
    if proc.ppid() != os.getpid():
        return False
    command = " ".join(proc.cmdline())
    return "multiprocessing.forkserver" in command or "multiprocessing.resource_tracker" in command


def _marked(run: str) -> list[psutil.Process]:
    """Live processes of this run, other than this one and its own helpers."""
    found = []
    for proc in psutil.process_iter(["pid"]):
        if proc.pid == os.getpid():
            continue
        try:
            if (
                proc.environ().get(MARK) == run
                and proc.status() != psutil.STATUS_ZOMBIE
                and not _own_helper(proc)
            ):
                found.append(proc)
        except (psutil.Error, OSError):
            pass
    return found


class Leftovers:
    def __init__(self):
        self.run = f"{os.getpid()}-{time.time_ns()}"
        self.tmpdir = tempfile.mkdtemp(prefix="distrl-tests-")
        self.session = None
        os.environ[MARK] = self.run
        os.environ["TMPDIR"] = self.tmpdir
        os.environ.setdefault("RAY_TMPDIR", "/tmp")  # Ray's own directory stays /tmp/ray
        tempfile.tempdir = None  # gettempdir() reads TMPDIR again

    def pytest_sessionstart(self, session):
        self.session = session

    def pytest_unconfigure(self, config):
        """After xdist's workers are gone: what is left fails the run."""
        found = []
        deadline = time.time() + _GRACE_S
        while _marked(self.run) and time.time() < deadline:
            time.sleep(0.5)
        for proc in _marked(self.run):
            try:
                found.append(f"process {proc.pid}: {' '.join(proc.cmdline())[:200]}")
                proc.kill()
            except psutil.Error:
                pass
        made = _recorded(self.tmpdir, "netns") & _namespaces()
        found += [f"network namespace {n}" for n in sorted(made)]
        ray_current = _ray_current()
        if ray_current in _recorded(self.tmpdir, "ray"):
            found.append(f"{_RAY_CURRENT} naming {ray_current}, a head this run made")
        failed = bool(found) or (self.session is not None and self.session.exitstatus != 0)
        if failed:
            print(f"\ndistrl tests: the run's files are kept in {self.tmpdir}", file=sys.stderr)
        else:
            _remove_at_exit(self.tmpdir)
        if found:
            print("distrl tests: left behind after the run:", file=sys.stderr)
            for line in found:
                print(f"  {line}", file=sys.stderr)
            if self.session is not None and self.session.exitstatus == 0:
                self.session.exitstatus = 1


def install(config) -> None:
    """Registers the plugin in the controlling process only (xdist workers inherit its
    environment and report to it)."""
    if hasattr(config, "workerinput"):
        return
    config.pluginmanager.register(Leftovers(), "distrl-leftovers")
