"""The pinned stack loads in the order every Launchpad node loads it.

Launchpad and Reverb import TensorFlow; rlax then imports distrax and
tensorflow_probability, which refuses to load after a TensorFlow it considers too old
(tensorflow-probability >= 0.17 does). A wrong pin shows up here, in a fresh process,
rather than inside a node at run time.
"""

import subprocess
import sys

import pytest

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
