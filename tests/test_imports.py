"""The import structure of distrl: no cycle between its units, node classes that
import without Launchpad, and every module importing beside the whole stack (the core
without it: tests/test_core.py).

A unit is a subpackage of distrl (agents, envs, nodes, program, analysis, ...) or a
top-level module (distrl/config.py, distrl/metrics.py, ...). Every import counts,
including relative and function-level ones, read from the source (ast), not from
what happens to be imported at run time.
"""

import ast
import json
import math
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "distrl"
PACKAGE_INIT = "distrl/__init__"  # the package's own module: a unit of its own


def module_name(path: pathlib.Path) -> str:
    """'distrl.nodes.actor' for distrl/nodes/actor.py, 'distrl.nodes' for its __init__."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def unit_of(module: str) -> str | None:
    """The unit a distrl module belongs to ('nodes', 'config', ...); None outside distrl."""
    parts = module.split(".")
    if parts[0] != "distrl":
        return None
    if len(parts) == 1:
        return PACKAGE_INIT
    return parts[1]


def is_unit(name: str) -> bool:
    return (PACKAGE / f"{name}.py").is_file() or (PACKAGE / name / "__init__.py").is_file()


def imported_modules(source: str, package: str) -> set[str]:
    """The absolute names of every module `source` imports, anywhere in it; `package`
    is the package it is in (relative imports start there).

    `from distrl import x` names distrl.x when x is a unit (a submodule or subpackage),
    else the package's own module (a name defined in distrl/__init__.py).
    """
    tree = ast.parse(source)
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module
            if source == "distrl":
                found.update(
                    f"distrl.{a.name}" if is_unit(a.name) else "distrl" for a in node.names
                )
            else:
                found.add(source)
    return found


def unit_graph() -> dict[str, set[str]]:
    """{unit: the other units it imports}, over every .py file under distrl/."""
    graph: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        unit = unit_of(module_name(path))
        edges = graph.setdefault(unit, set())
        package = module_name(path) if path.name == "__init__.py" else module_name(path.parent)
        for module in imported_modules(path.read_text(), package):
            target = unit_of(module)
            if target is not None and target != unit:
                edges.add(target)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of `graph` as [a, b, ..., a], or None (depth-first, three colours)."""
    state: dict[str, str] = {}  # "open" while on the DFS path, "done" once finished
    path: list[str] = []

    def visit(unit: str) -> list[str] | None:
        state[unit] = "open"
        path.append(unit)
        for target in sorted(graph.get(unit, ())):
            if state.get(target) == "open":
                return path[path.index(target) :] + [target]
            if target not in state:
                cycle = visit(target)
                if cycle:
                    return cycle
        path.pop()
        state[unit] = "done"
        return None

    for unit in sorted(graph):
        if unit not in state:
            cycle = visit(unit)
            if cycle:
                return cycle
    return None


def test_the_graph_sees_every_kind_of_import():
    graph = unit_graph()
    assert {"agents", "envs", "nodes", "program", "analysis", "config"} <= set(graph)
    assert "nodes" in graph["program"]  # topology: from distrl.nodes.actor import Actor
    assert "experiment" in graph["program"]  # from distrl import experiment as experiment_lib
    assert "cli" in graph["local"]  # a function-level import


def test_imports_resolve_relative_and_nested_ones():
    source = (
        "from .. import config, envs\n"
        "from ..nodes import actor\n"
        "from . import staging\n"
        "def f():\n"
        "    import distrl.analysis.plots\n"
        "    from distrl import __doc__\n"
    )
    assert imported_modules(source, "distrl.program") == {
        "distrl.config",
        "distrl.envs",
        "distrl.nodes",
        "distrl.program",
        "distrl.analysis.plots",
        "distrl",
    }


def test_no_import_cycle_between_units():
    cycle = find_cycle(unit_graph())
    assert cycle is None, "import cycle between distrl units: " + " -> ".join(cycle)


def _run_python(args: list[str], timeout_s: float) -> subprocess.CompletedProcess:
    """`python ARGS` from the repository root (a script that needs Launchpad absent blocks
    it itself)."""
    return subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])},
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )


def test_node_modules_import_without_launchpad():
    nodes = sorted(
        module_name(p) for p in (PACKAGE / "nodes").glob("*.py") if p.name != "__init__.py"
    )
    assert {"distrl.nodes.actor", "distrl.nodes.learner", "distrl.nodes.lifecycle"} <= set(nodes)
    script = (
        "import sys\n"
        "sys.modules['launchpad'] = None  # any import of it raises ImportError\n"
        f"for name in {nodes!r}:\n"
        "    __import__(name)\n"
    )
    proc = _run_python(["-c", script], timeout_s=300)
    assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.mark.timeout(600)
def test_nodes_step_without_launchpad(tmp_path):
    """The real actor, learner and counter, connected by Reverb and courier alone
    (tests/nodes_without_launchpad.py): one update on the actor's first rollout."""
    proc = _run_python(["tests/nodes_without_launchpad.py", str(tmp_path / "run")], timeout_s=540)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    first, second = out["actor_steps"]
    assert first["env_steps"] == 1024 and first["items_written"] > 0, first
    assert second["env_steps"] == 2048 and second["items_written"] == first["items_written"]
    (update,) = out["learner_steps"]
    assert update["version"] == 1 and math.isfinite(update["loss"]), update
    assert out["table_size"] == first["items_written"] + second["items_written"]
    assert out["counts"]["env_steps"] >= 1024, out  # the first rollout's, at least (async)


def _printed_last(script: str):
    """The JSON that `python -c script` prints last (it must exit 0)."""
    proc = _run_python(["-c", script], timeout_s=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_every_module_imports_with_the_distributed_stack_present():
    """The distributed layer (replay/, nodes/, program/) still imports, Reverb and
    Launchpad with it, and every public name of `distrl.replay` (most loaded on first
    use, so that the core imports without Reverb: tests/test_core.py) resolves."""
    modules = sorted(module_name(p) for p in PACKAGE.rglob("*.py"))
    assert {"distrl.replay.writer", "distrl.program.topology", "distrl.local"} <= set(modules)
    script = (
        "import importlib, json, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "from distrl import replay\n"
        "missing = [n for n in replay.__all__ if getattr(replay, n, None) is None]\n"
        "loaded = sorted({m.partition('.')[0] for m in sys.modules} & {'reverb', 'launchpad'})\n"
        "print(json.dumps([missing, loaded]))\n"
    )
    missing, loaded = _printed_last(script)
    assert missing == [] and loaded == ["launchpad", "reverb"]


def test_the_trainer_and_the_launcher_import_without_loading_tensorflow():
    """rlax's TFP substrate would load TensorFlow for its docstrings alone (2.4 CPU s of
    every start: distrl/agents/rlax_import.py); distrl hides it for that import, and
    TensorFlow still loads for Reverb afterwards, in the same process."""
    script = (
        "import json, sys\n"
        "import distrl.local, distrl.nodes.evaluator, distrl.program.launcher\n"
        "before = 'tensorflow' in sys.modules\n"
        "from distrl.agents.rlax_import import rlax\n"
        "loss = float(rlax.huber_loss(3.0, 1.0))\n"
        "import reverb, tensorflow\n"
        "print(json.dumps([before, loss, tensorflow.__version__]))\n"
    )
    before, loss, version = _printed_last(script)
    assert before is False and loss == 2.5 and version.startswith("2.")


def test_find_cycle_names_the_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
