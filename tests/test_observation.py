"""Observation elements hidden from the agent (`config.env.hidden_observation`, issue 39's
masked CartPole): what the agent sees, everywhere it could see it, and a real run."""

import jax
import numpy as np
import pytest

from distrl import config as config_lib
from distrl import experiment as experiment_lib
from distrl import local
from distrl.envs import gymnax_env, observation


def masked_cartpole():
    config = config_lib.base_config("ppo")
    config.env.name = "gymnax:CartPole-v1"
    config.env.hidden_observation = (3, 1)
    return config


def test_the_agent_sees_only_the_kept_elements_at_reset_step_and_observe():
    env = experiment_lib.Experiment(masked_cartpole()).env
    inner = gymnax_env.make("CartPole-v1")
    assert env.spec.observation_shape == (2,) and env.spec.obs_size == 2
    assert env.spec._replace(observation_shape=(4,)) == inner.spec  # nothing else changes
    key = jax.random.PRNGKey(3)
    state, ts = env.reset(key)
    inner_state, inner_ts = inner.reset(key)
    np.testing.assert_array_equal(ts.observation, inner_ts.observation[np.array([0, 2])])
    for t in range(5):
        step_key = jax.random.PRNGKey(t)
        state, ts = env.step(state, t % 2, step_key)
        inner_state, inner_ts = inner.step(inner_state, t % 2, step_key)
        kept = inner_ts.observation[np.array([0, 2])]
        np.testing.assert_array_equal(ts.observation, kept)
        np.testing.assert_array_equal(env.observe(state), kept)
        assert (ts.reward, ts.discount, ts.last) == (
            inner_ts.reward,
            inner_ts.discount,
            inner_ts.last,
        )


def test_the_wrapper_is_a_static_jit_argument_equal_across_builds():
    a, b = (experiment_lib.Experiment(masked_cartpole()).env for _ in range(2))
    assert a == b and hash(a) == hash(b)
    assert a.hidden == (1, 3)


@pytest.mark.parametrize(
    "hidden, message",
    [
        ((1, 4), "[4] are not elements of the observation; need integers 0 .. 3"),
        ((2, 2), "(2, 2) repeats an element"),
        ((0, 1, 2, 3), "hides all 4 elements of the observation; keep at least one"),
        ((True,), "[True] are not elements"),
    ],
)
def test_bad_indices_are_named(hidden, message):
    with pytest.raises(ValueError) as err:
        observation.hide(gymnax_env.make("CartPole-v1"), hidden)
    assert message in str(err.value)


def test_a_single_process_run_trains_and_evaluates_on_the_hidden_observation():
    """distrl.local end to end on masked CartPole: the policy's input is 2 wide, and a
    few updates run and evaluate (memory is what it lacks, not data)."""
    config = masked_cartpole()
    config.actor.update(dict(num_envs=8, unroll_length=32))
    config.evaluator.update(dict(num_envs=10, confirm_envs=10))
    config.budget.update(dict(env_steps=2048, seconds=0.0))
    result = local.train(config)
    assert result.env_steps >= 2048 and result.updates >= 8
    assert np.isfinite(result.mean_return) and result.eval_episodes >= 10
    # The policy's input layer is 2 wide: the hidden velocities never reach it.
    widths = {leaf.shape[0] for leaf in jax.tree.leaves(result.params) if leaf.ndim == 2}
    assert 2 in widths and 4 not in widths
