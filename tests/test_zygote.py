"""The preloaded parent (distrl/program/zygote.py) on its own: a fork runs a script with
its node's environment and output, its exit code and signal come back, and when the
parent dies its children die with it and nothing more is forked."""

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from distrl.program import zygote

SCRIPT = """
import os, sys, time
import jax
print("platforms", jax.config.jax_platforms, os.environ["XLA_FLAGS"], flush=True)
if sys.argv[1] == "exit":
    sys.exit(3)
time.sleep(120)
"""


@pytest.fixture
def parent(tmp_path):
    log = []
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    env.pop("JAX_PLATFORMS", None)
    with open(tmp_path / "parent.out", "ab") as out:
        z = zygote.Zygote(env, log.append, out)
    yield z, env, log
    z.close()


def _fork(z, env, tmp_path, mode: str, **changes):
    script = tmp_path / "node.py"
    script.write_text(SCRIPT)
    with open(tmp_path / f"{mode}.out", "ab") as out:
        return z.fork(mode, [str(script), mode], {**env, **changes}, out.fileno())


def test_a_fork_gets_its_environment_output_and_exit_code(parent, tmp_path):
    z, env, log = parent
    node = _fork(z, env, tmp_path, "exit", JAX_PLATFORMS="cpu", XLA_FLAGS="--xla_dump_to=x")
    assert node.wait(timeout=60) == 3
    assert (tmp_path / "exit.out").read_text() == "platforms cpu --xla_dump_to=x\n"
    assert any("ready" in line for line in log), log
    sleeper = _fork(z, env, tmp_path, "sleep", XLA_FLAGS="")
    time.sleep(0.5)
    assert sleeper.poll() is None
    sleeper.send_signal(signal.SIGTERM)
    assert sleeper.wait(timeout=30) == -signal.SIGTERM


def test_an_environment_a_fork_cannot_apply_is_refused(parent, tmp_path):
    z, env, log = parent
    with pytest.raises(zygote.Unavailable):
        _fork(z, env, tmp_path, "exit", LD_PRELOAD="/nonexistent.so", XLA_FLAGS="")
    assert any("LD_PRELOAD" in line for line in log), log
    assert z.available()  # the next node may still fork


def test_when_the_parent_dies_its_children_die_and_nothing_more_forks(parent, tmp_path):
    z, env, log = parent
    node = _fork(z, env, tmp_path, "sleep", XLA_FLAGS="")
    child = psutil.Process(node.pid)
    os.kill(z.pid, signal.SIGKILL)
    assert node.wait(timeout=30) == -signal.SIGKILL
    child.wait(timeout=15)  # the parent-death signal, not only the report
    assert not z.available()
    with pytest.raises(zygote.Unavailable):
        _fork(z, env, tmp_path, "exit", XLA_FLAGS="")
    assert any("nodes start the plain way" in line for line in log), log


def _early_env():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    env.pop("JAX_PLATFORMS", None)
    return env


def test_a_parent_started_early_is_adopted_and_forks(tmp_path):
    env = _early_env()
    zygote.start_early(env)
    z = zygote.take_early()
    assert z is not None and zygote.take_early() is None  # handed over once
    log = []
    try:
        # The launcher's own imports set variables of TensorFlow's in every node's
        # environment: the parent's imports set the same, and it reports them.
        nodes_env = {**env, "TF2_BEHAVIOR": "1"}
        assert z.adopt(log.append, nodes_env), log
        assert any("ready" in line for line in log) and any("adopted" in line for line in log)
        node = _fork(z, nodes_env, tmp_path, "exit", XLA_FLAGS="")
        assert node.wait(timeout=60) == 3
    finally:
        z.close()


def test_an_early_parent_that_does_not_fit_the_nodes_is_closed():
    zygote.start_early(_early_env())
    z = zygote.take_early()
    process = psutil.Process(z.pid)
    log = []
    assert not z.adopt(log.append, {**_early_env(), "DISTRL_TEST_ONLY": "x"})
    assert any("DISTRL_TEST_ONLY" in line for line in log), log
    assert not z.available()
    process.wait(timeout=15)


def test_an_early_parent_nothing_adopted_is_reaped_at_exit():
    zygote.start_early(_early_env())
    pid = zygote._early.pid  # noqa: SLF001 - the parent as the exit hook finds it
    zygote.discard_early()
    assert zygote.take_early() is None
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # reaped already


FORKED = """
import os, sys
from distrl.program import zygote
import launchpad, reverb, jax  # the launcher's imports, with its TF_CPP_MIN_LOG_LEVEL
env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}  # the nodes'
zygote.fork_early(env)
z = zygote.take_early()
log = []
try:
    assert z.adopt(log.append, env), log
    assert any("a fork of the launcher" in line for line in log), log
    with open(f"/proc/{z.pid}/stat", "rb") as f:  # this process's fork, its command line
        assert int(f.read().rpartition(b")")[2].split()[1]) == os.getpid()  # ppid
    with open(f"/proc/{z.pid}/cmdline", "rb") as f:  # ... retitled for ps
        assert f.read().rstrip(b"\\0") == b"distrl.program.zygote"
    with open(sys.argv[2], "ab") as out:
        node = z.fork("exit", [sys.argv[1], "exit"], {**env, "XLA_FLAGS": "x"}, out.fileno())
    print("exit", node.wait(timeout=60), flush=True)
finally:
    z.close()
print("closed", z._process.returncode)
"""

LOG_LEVEL_SCRIPT = """
import os, sys
from jax._src import logging_config
print("log level", os.environ["TF_CPP_MIN_LOG_LEVEL"], logging_config._default_TF_CPP_MIN_LOG_LEVEL)
sys.exit(3)
"""


def test_a_parent_forked_from_a_process_that_imported_the_stack_serves(tmp_path):
    """`fork_early`: the launcher, its imports done, forks the parent (no second
    interpreter imports them); the parent forks nodes and ends when closed. The
    launcher imported the stack with another TF_CPP_MIN_LOG_LEVEL than the nodes':
    they have theirs as if they had imported it (JAX's default), and no C++ logging
    read the launcher's during its imports (it logged nothing even at level 0)."""
    script = tmp_path / "node.py"
    script.write_text(LOG_LEVEL_SCRIPT)
    env = {**_early_env(), "TF_CPP_MIN_LOG_LEVEL": "0"}
    done = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", FORKED, str(script), str(tmp_path / "exit.out")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout == "exit 3\nclosed 0\n", done.stdout + done.stderr[-3000:]
    assert done.stderr == ""
    assert (tmp_path / "exit.out").read_text() == "log level 2 2\n"
