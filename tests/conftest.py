"""Shared test helpers: configs loaded from configs/*.py, launching launch/train.py as a
user does (in its own process session, so that every process it started can be
checked for afterwards), and a clean CPU setup."""

import os
import pathlib
import subprocess
import sys
import time

import psutil
import pytest

from distrl import cli, compile_cache

ROOT = pathlib.Path(__file__).resolve().parent.parent
TRAIN = [sys.executable, str(ROOT / "launch" / "train.py")]

# The suite compiles the same functions in many processes: distrl's cache, as a run uses.
compile_cache.enable()


def load_config(name: str):
    """The ml_collections config of configs/<name>.py, as the launcher loads it."""
    return cli.load_file(name)


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


os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
