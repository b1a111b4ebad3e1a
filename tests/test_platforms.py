"""Only the learner may hold an accelerator: every other node group's processes run JAX
on the CPU, and the learner's platform is the one `config.learner.device` asks for
("auto": JAX's default, the host's accelerator where it has one)."""

import os
import subprocess
import sys

import pytest

from distrl.program import nodeenv

_PLATFORM = "import jax; print(jax.default_backend())"


def _platform_with(env: dict) -> str:
    clean = {k: v for k, v in os.environ.items() if k != "JAX_PLATFORMS"}
    out = subprocess.run(
        [sys.executable, "-c", _PLATFORM], env={**clean, **env}, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip().splitlines()[-1]


def test_every_group_but_the_learner_runs_jax_on_the_cpu():
    envs = nodeenv.node_envs()
    assert {g: e.get("JAX_PLATFORMS") for g, e in envs.items() if g != "learner"} == {
        "actor": "cpu",
        "evaluator": "cpu",
        "counter": "cpu",
        "replay": "cpu",
    }
    assert "JAX_PLATFORMS" not in envs["learner"]  # auto: JAX's own choice
    assert nodeenv.node_envs(learner_device="gpu")["learner"]["JAX_PLATFORMS"] == "gpu"


@pytest.mark.parametrize("device", ["auto", "cpu"])
def test_the_learner_takes_the_platform_asked_for(device):
    """A process with the learner's environment picks what `learner.device` says (auto:
    what a plain process picks on this host); an actor's, the CPU."""
    envs = nodeenv.node_envs(learner_device=device)
    expected = _platform_with({}) if device == "auto" else device
    assert _platform_with(envs["learner"]) == expected
    assert _platform_with(envs["actor"]) == "cpu"
