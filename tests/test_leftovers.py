"""The leftover check (tests/leftovers.py) fails a pytest run that leaves a network
namespace behind and names it; a clean run passes and removes its temporary directory."""

import os
import shutil
import subprocess
import sys

import pytest
from conftest import ROOT

LEAKY = """
import pathlib, subprocess, tempfile
import leftovers

def test_starts_a_process_and_writes_a_temp_dir():
    made = tempfile.mkdtemp()  # under the run's own TMPDIR
    pathlib.Path(__file__).with_name("made.txt").write_text(made)
    {start}
"""


def _pytest(tmp_path, start: str):
    (tmp_path / "test_inner.py").write_text(LEAKY.format(start=start))
    (tmp_path / "conftest.py").write_text(
        f"import sys\nsys.path.insert(0, {str(ROOT / 'tests')!r})\nimport leftovers\n\n"
        "def pytest_configure(config):\n    leftovers.install(config)\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("DISTRL_TEST_RUN", "TMPDIR")}
    env["DISTRL_TEST_LEFTOVER_GRACE_S"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _kept_dir(out: str) -> str | None:
    for line in out.splitlines():
        if "the run's files are kept in " in line:
            return line.split("kept in ", 1)[1].strip()
    return None


def test_a_clean_run_passes_and_removes_its_temporary_directory(tmp_path):
    done = _pytest(tmp_path, "subprocess.run(['true'], check=True)")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "left behind" not in done.stderr and _kept_dir(done.stderr) is None
    made = (tmp_path / "made.txt").read_text()
    assert "/distrl-tests-" in made, made  # the inner run's own directory
    assert not os.path.exists(made), made


@pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("ip"), reason="network namespaces need root and ip"
)
def test_a_network_namespace_the_run_made_and_left_fails_the_run(tmp_path):
    name = f"distrl-leak-{os.getpid()}"
    start = (
        f'subprocess.run(["ip", "netns", "add", "{name}"], check=True)\n'
        f'    leftovers.record("netns", "{name}")\n'
        '    leftovers.record("netns", "distrl-made-and-deleted")'
    )
    try:
        done = _pytest(tmp_path, start)
    finally:
        subprocess.run(["ip", "netns", "del", name], capture_output=True)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"network namespace {name}" in done.stderr, done.stderr
    assert "distrl-made-and-deleted" not in done.stderr  # gone by the end: not a leftover
    subprocess.run(["rm", "-rf", _kept_dir(done.stderr)], check=True)
