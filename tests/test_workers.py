"""The suite's count of test processes (tests/workers.py, `make test`'s `-n auto`): 1.5 a
free core, rounded up, at least one; fewer when other processes keep the cores busy."""

import subprocess
import sys

import psutil
import workers

BURN = "import time\nend = time.time() + 10\nwhile time.time() < end: pass"


def test_an_idle_two_core_machine_runs_three_and_a_busy_one_runs_one():
    assert [workers.count(free) for free in (2.0, 1.8, 1.5, 1.0, 0.5, 0.0)] == [3, 3, 3, 2, 1, 1]


def test_processes_burning_every_core_leave_one_test_process():
    burners = [
        subprocess.Popen([sys.executable, "-c", BURN]) for _ in range(psutil.cpu_count() or 1)
    ]
    try:
        n, line = workers.decide()
    finally:
        for proc in burners:
            proc.kill()
            proc.wait()
    assert n == 1, line
    assert line.startswith("test processes: 1 ("), line
