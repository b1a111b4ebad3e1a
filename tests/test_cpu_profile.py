"""The CPU profile (tests/cpu_profile.py, `--cpu-profile=PATH`): a row per test with its
own CPU seconds and those of the child processes it waited for, and the controller's
summary of the files that used the most."""

import csv
import os
import subprocess
import sys

from conftest import ROOT

INNER = """
import subprocess, sys

def test_a_child_burns_cpu():
    subprocess.run([sys.executable, "-c", "sum(i * i for i in range(6_000_000))"], check=True)

def test_the_worker_burns_cpu():
    sum(i * i for i in range(6_000_000))

def test_idle():
    pass
"""


def test_each_tests_own_and_childrens_cpu_go_to_its_row(tmp_path):
    (tmp_path / "test_inner.py").write_text(INNER)
    (tmp_path / "conftest.py").write_text(
        f"import sys\nsys.path.insert(0, {str(ROOT / 'tests')!r})\nimport cpu_profile\n\n"
        "def pytest_addoption(parser):\n    cpu_profile.add_option(parser)\n\n"
        "def pytest_configure(config):\n    cpu_profile.install(config)\n"
    )
    path = tmp_path / "cpu.csv"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-n",
            "2",
            f"--cpu-profile={path}",
            str(tmp_path),
        ],  # fmt: skip
        cwd=tmp_path,
        env={k: v for k, v in os.environ.items() if k != "PYTEST_XDIST_WORKER"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    with open(path, newline="") as f:
        rows = {r["test"].split("::")[1]: r for r in csv.DictReader(f) if r["test"] != "test"}
    assert sorted(rows) == ["test_a_child_burns_cpu", "test_idle", "test_the_worker_burns_cpu"]
    child, idle, worker = (rows[n] for n in sorted(rows))
    assert float(child["cpu_children_s"]) > 0.2 > float(child["cpu_self_s"]), child
    assert float(worker["cpu_self_s"]) > 0.2 > float(worker["cpu_children_s"]), worker
    assert float(idle["cpu_self_s"]) + float(idle["cpu_children_s"]) < 0.2, idle
    assert "CPU seconds by file" in done.stdout and "test_inner.py" in done.stdout, done.stdout
