"""The pinned stack loads in the order every Launchpad node loads it, and the accelerator
extras pin each lock's jax.

Launchpad and Reverb import TensorFlow; rlax then imports distrax and
tensorflow_probability, which refuses to load after a TensorFlow it considers too old
(tensorflow-probability >= 0.17 does). A wrong pin shows up here, in a fresh process,
rather than inside a node at run time.
"""

import pathlib
import subprocess
import sys

import pytest
import tomli  # tomllib from Python 3.11; pytest's dependency here
from packaging.requirements import Requirement

ROOT = pathlib.Path(__file__).resolve().parent.parent

_IMPORT_ORDER = """
import launchpad, reverb
import tensorflow as tf
import jax, haiku, optax, rlax, distrax, tensorflow_probability
import jax.numpy as jnp
# rlax's distributions go through tensorflow_probability's JAX substrate: use one.
logits = jnp.array([[0.0, 1.0, 2.0]])
log_prob = rlax.softmax().logprob(jnp.array([2]), logits)
print(tf.__version__, jax.__version__, tensorflow_probability.__version__, float(log_prob[0]))
"""


def test_launchpad_and_reverb_then_jax_stack_import_in_one_process():
    result = subprocess.run(
        [sys.executable, "-c", _IMPORT_ORDER], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    tf_version, jax_version, tfp_version, log_prob = result.stdout.split()
    assert tf_version.startswith("2.8.")
    assert jax_version == "0.6.2"
    assert tfp_version == "0.16.0"
    # log softmax of [0, 1, 2] at index 2.
    assert abs(float(log_prob) - (-0.40760596)) < 1e-5


_GYMNAX_AFTER_THE_STACK = """
import launchpad, reverb
import tensorflow as tf
import jax, haiku, optax, rlax
import gymnax, flax, google.protobuf
env, params = gymnax.make("Breakout-MinAtar")
obs, state = env.reset(jax.random.PRNGKey(0), params)
print(google.protobuf.__version__, flax.__version__, obs.shape)
"""


def test_gymnax_imports_after_the_stack_with_its_pins_unchanged():
    """gymnax 1.0.1 (flax, gymnasium) loads in a node, after TF, leaving protobuf 3.19.
    A venv made before gymnax was pinned (`make setup` not rerun) skips this."""
    pytest.importorskip("gymnax")
    result = subprocess.run(
        [sys.executable, "-c", _GYMNAX_AFTER_THE_STACK], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    protobuf, flax_version, shape = result.stdout.split(maxsplit=2)
    assert protobuf == "3.19.6" and flax_version == "0.10.7" and shape.strip() == "(10, 10, 4)"


_MUJOCO_AFTER_THE_STACK = """
import launchpad, reverb
import tensorflow as tf
import jax, haiku, optax, rlax
import gymnasium, mujoco, numpy, google.protobuf
for name in ("HalfCheetah-v5", "Hopper-v5", "InvertedPendulum-v5"):
    env = gymnasium.make(name)
    env.reset(seed=0)
    for _ in range(50):
        obs, reward, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            env.reset()
    assert numpy.isfinite(obs).all() and numpy.isfinite(reward), name
print(mujoco.__version__, numpy.__version__, google.protobuf.__version__)
"""


def test_gymnasium_mujoco_envs_step_after_the_stack_with_its_pins_unchanged():
    """mujoco 3.17.0 (gymnasium's MuJoCo v5 envs) loads in a node, after TF, and its three
    envs step, leaving numpy 1.26 and protobuf 3.19. A venv made before mujoco was pinned
    (`make setup` not rerun) skips this."""
    pytest.importorskip("mujoco")
    result = subprocess.run(
        [sys.executable, "-c", _MUJOCO_AFTER_THE_STACK], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split() == ["3.17.0", "1.26.4", "3.19.6"]


def _locked(lock: str) -> dict:
    """{package: version} of a lock file (`name==version` lines)."""
    lines = (ROOT / lock).read_text().splitlines()
    return dict(line.split("==") for line in lines if "==" in line and not line.startswith(" "))


def test_the_accelerator_extras_pin_the_jax_of_each_lock():
    """pyproject.toml's gpu and tpu extras name, for each Python, the jax of that Python's
    lock: requirements.lock's on 3.10, requirements-core.lock's on 3.12 (`make setup-core
    CORE_EXTRA=...` installs them against it)."""
    extras = tomli.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    stacks = {"3.10": _locked("requirements.lock"), "3.12": _locked("requirements-core.lock")}
    pinned = {}
    for extra in ("gpu", "tpu"):
        for line in extras[extra]:
            req = Requirement(line)
            (version,) = [s.version for s in req.specifier if s.operator == "=="]
            for python, lock in stacks.items():
                if req.marker.evaluate({"python_version": python}):
                    assert req.name == "jax" and version == lock["jax"] == lock["jaxlib"], line
                    pinned[extra, python] = version
    assert pinned == {
        ("gpu", "3.10"): "0.6.2",
        ("gpu", "3.12"): "0.11.2",
        ("tpu", "3.12"): "0.11.2",
    }
