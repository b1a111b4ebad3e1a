"""distrl: a distributed actor-learner RL system (Reverb + Launchpad + JAX).

Importing the package has no side effects; the entry points turn on JAX's
compilation cache (`distrl.compile_cache`).

The core, the modules `CORE` names, imports and runs with Reverb, Launchpad, Courier
and TensorFlow absent: the envs, networks, agents and acting, the pipelines' single-
process side, `distrl.local` and the learner's update (and its feed to the device),
with the config and files they use. It runs on a current Python and JAX
(requirements-core.lock, `make test-core`) on a GPU or TPU host. The rest (replay/,
nodes/, program/) is the distributed layer, which imports Reverb and Launchpad where it
uses them. tests/test_core.py holds CORE to it.
"""

import pathlib

# Module names; "pkg.*" is the package and every module under it.
CORE = (
    "distrl",
    "distrl.acting.*",
    "distrl.agents.*",
    "distrl.analysis.*",
    "distrl.checkpoints.*",  # the package imports them all (the config checks its section)
    "distrl.envs.*",
    "distrl.pipelines.*",
    "distrl.records.*",
    "distrl.cli",
    "distrl.compile_cache",
    "distrl.config",
    "distrl.errors",
    "distrl.evaluator_config",
    "distrl.exits",
    "distrl.experiment",
    "distrl.files",
    "distrl.launch_config",
    "distrl.local",
    "distrl.metrics",
    "distrl.networks",
    "distrl.nodes",  # the package alone, and the learner's feed to its device:
    "distrl.nodes.feed",  # the update path on an accelerator (benchmarks/accelerator.py)
    "distrl.packing",
    "distrl.policy",
    "distrl.program",  # the package alone: its progress line is local.py's too
    "distrl.program.progress",
    "distrl.pyenv",
    "distrl.replay",  # the package alone: the pipelines name its TABLE and Reading
    "distrl.replay.reading",
    "distrl.resources",
    "distrl.spaces",
    "distrl.types",
)


def core_modules() -> list[str]:
    """Every module name `CORE` covers, each package's modules read from the disk (none
    is imported here)."""
    root = pathlib.Path(__file__).resolve().parent.parent
    names = []
    for entry in CORE:
        if not entry.endswith(".*"):
            names.append(entry)
            continue
        package = root.joinpath(*entry[:-2].split("."))
        for path in sorted(package.rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names
