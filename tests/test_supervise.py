"""distrl's local supervisor on a small real Launchpad program (tests/supervise_program.py):
every way a node can die is named, restarted within the policy or ends the run, and no
node process outlives its launcher, however the launcher dies."""

import json
import os
import signal
import time

import psutil
import pytest

from conftest import ROOT, assert_nothing_left, launch_train

PROGRAM = str(ROOT / "tests" / "supervise_program.py")


def _run(run_dir, mode: str, max_restarts: int):
    proc = launch_train([], executable_args=[PROGRAM, str(run_dir), mode, str(max_restarts)])
    out, _ = proc.communicate(timeout=180)
    assert proc.returncode == 0, out[-3000:]
    assert_nothing_left(proc)
    return out, json.loads(out.strip().splitlines()[-1])


def test_each_death_is_named_and_the_node_restarted_within_the_policy(tmp_path):
    out, outcome = _run(tmp_path / "run", "faults", 3)
    causes = [r["cause"] for r in outcome["restarts"]]
    assert causes == [
        "exited with code -9 (killed by SIGKILL)",
        "raised ValueError: injected in attempt 1 (exited with code 1)",
        "exited with code -6 (killed by SIGABRT)",
    ], outcome
    assert [r["restart"] for r in outcome["restarts"]] == [1, 2, 3]
    assert outcome["failures"] == {}  # every death was restarted: none ended the run
    for r in outcome["restarts"]:
        assert os.path.exists(r["report"]), r
        assert f"victim {r['cause']}; restarting it" in out  # one line each in the terminal
    assert "Traceback" not in out
    traceback_report = open(outcome["restarts"][1]["report"]).read()
    assert "ValueError: injected in attempt 1" in traceback_report.splitlines()[-1]


def test_a_death_beyond_the_policy_stops_every_node_and_is_named(tmp_path):
    run_dir = tmp_path / "run"
    out, outcome = _run(run_dir, "fatal", 0)
    assert outcome["restarts"] == []
    assert outcome["failures"] == {"victim": "exited with code -9 (killed by SIGKILL)"}, outcome
    assert "victim exited with code -9 (killed by SIGKILL); stopping the program" in out
    log = (run_dir / "logs" / "nodes" / "launcher").read_text()
    assert "sleeper ended: exited with code 0" in log, log  # stopped by SIGTERM, cleanly
    assert not list((run_dir / "tmp").iterdir())  # the node pickles are gone


def _node_processes(launcher_pid: int, count: int, timeout_s: float = 120.0):
    """The launcher's `count` node processes, once they all run."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        children = psutil.Process(launcher_pid).children()
        if len(children) >= count:
            return children
        time.sleep(0.2)
    raise AssertionError(f"the launcher started {len(children)} of {count} nodes")


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGHUP], ids=["sigkill", "sighup"])
def test_no_node_outlives_its_launcher(tmp_path, sig):
    proc = launch_train([], executable_args=[PROGRAM, str(tmp_path / "run"), "hang", "0"])
    try:
        nodes = _node_processes(proc.pid, 2)
        time.sleep(2.0)  # every node inside its body
        proc.send_signal(sig)
        proc.wait(timeout=60)
        deadline = time.time() + 15  # SIGHUP: a graceful stop; SIGKILL: the parent-death signal
        while any(n.is_running() and n.status() != psutil.STATUS_ZOMBIE for n in nodes):
            assert time.time() < deadline, [n.cmdline() for n in nodes if n.is_running()]
            time.sleep(0.2)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert_nothing_left(proc)
