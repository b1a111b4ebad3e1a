"""The core stands alone: every module `distrl.CORE` names imports, with the learner's
benchmarks (`benchmarks/learner.py`, `benchmarks/accelerator.py`), and the single-process
trainer (`python -m distrl.local`) and `benchmarks/learner.py` run to their end, with
Reverb, Launchpad, Courier and TensorFlow unimportable, as on a host that lacks them (a
current Python and JAX: `make test-core`).

Each check runs in a fresh interpreter whose first act is a `sys.meta_path` finder that
raises ImportError for those packages, as a missing package does (tensorflow-probability's
JAX substrate tries `import tensorflow` and handles exactly that), so what this test
process itself imported does not matter.
"""

import json
import pathlib
import re
import subprocess
import sys

import pytest

import distrl

ROOT = pathlib.Path(__file__).resolve().parent.parent
BLOCKED = ("reverb", "launchpad", "courier", "tensorflow")
# Outside distrl: the learner's benchmarks, on the CPU and on an accelerator.
CORE_BENCHMARKS = (
    "benchmarks",
    "benchmarks.common",
    "benchmarks.learner",
    "benchmarks.accelerator",
    "benchmarks.fused_ppo",
    "benchmarks.trainer",
)

_BLOCK = f"""
import importlib.abc, sys
class Absent(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in {BLOCKED!r}:
            raise ImportError(f"No module named {{name!r}} (blocked: the core runs without it)")
        return None
sys.meta_path.insert(0, Absent())
"""


def _run_blocked(code: str, timeout_s: float) -> subprocess.CompletedProcess:
    """`python -c CODE` from the repository root with the blocking finder installed first."""
    return subprocess.run(
        [sys.executable, "-c", _BLOCK + code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )


def _run_module_blocked(module: str, *args: str, timeout_s: float):
    """`python -m MODULE ARGS` (a script path: `python SCRIPT ARGS`) under the block."""
    run = (
        f"runpy.run_path({module!r}, run_name='__main__')"
        if module.endswith(".py")
        else f"runpy.run_module({module!r}, run_name='__main__', alter_sys=True)"
    )
    code = f"import runpy\nsys.argv = {[module, *args]!r}\nsys.path.insert(0, '.')\n{run}\n"
    return _run_blocked(code, timeout_s)


def test_core_names_modules_that_exist():
    for name in distrl.core_modules():
        path = ROOT.joinpath(*name.split("."))
        assert path.with_suffix(".py").is_file() or (path / "__init__.py").is_file(), name
    assert {"distrl.local", "distrl.agents.dqn", "distrl.pipelines.transitions"} <= set(
        distrl.core_modules()
    )


def test_the_block_makes_the_distributed_stack_unimportable():
    code = (
        "import importlib\n"
        f"for name in {[*BLOCKED, 'distrl.replay.writer']!r}:\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except ImportError:\n"
        "        print('absent', name)\n"
    )
    proc = _run_blocked(code, timeout_s=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split("\n")[:-1] == [
        f"absent {name}" for name in (*BLOCKED, "distrl.replay.writer")
    ]


def test_every_core_module_imports_with_the_distributed_stack_absent():
    modules = [*distrl.core_modules(), *CORE_BENCHMARKS]
    code = (
        "import importlib, json\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "loaded = {m.partition('.')[0] for m in sys.modules}\n"
        f"print(json.dumps(sorted(loaded & {set(BLOCKED)!r})))\n"
    )
    proc = _run_blocked(code, timeout_s=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.splitlines()[-1]) == []


# The summary line `distrl.local` ends with (its `main`).
_SUMMARY = re.compile(r"^(\w+) on 4x4: solved=(True|False) env_steps=(\d+) updates=(\d+) ")


@pytest.mark.parametrize(
    "config, budget",
    [("dqn", 20_000), ("ppo", 30_000)],
)
def test_single_process_trainer_runs_to_its_end_with_the_distributed_stack_absent(config, budget):
    proc = _run_module_blocked(
        "distrl.local",
        f"--config=configs/{config}.py",
        f"--config.budget.env_steps={budget}",
        "--quiet",
        timeout_s=540,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (summary,) = [m for line in proc.stdout.splitlines() if (m := _SUMMARY.match(line))]
    algorithm, _, env_steps, updates = summary.groups()
    assert algorithm == config and 0 < int(env_steps) <= budget and int(updates) > 0, summary[0]
    assert "greedy policy:" in proc.stdout  # the exact figures, after the summary


def test_learner_benchmark_runs_with_the_distributed_stack_absent():
    proc = _run_module_blocked(
        "benchmarks/learner.py",
        "--dqn-batches=32",
        "--ppo-chunks=1",
        "--seconds=0.2",
        timeout_s=540,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [line.split() for line in proc.stdout.splitlines() if line.startswith("cpu:0 ")]
    assert [(r[1], r[2]) for r in rows] == [("dqn", "[32]"), ("ppo", "[16,")], proc.stdout
    assert all(float(r[-2].replace(",", "")) > 0 for r in rows), rows  # updates/s
    assert "import with tensorflow/reverb/launchpad blocked: ok" in proc.stdout
