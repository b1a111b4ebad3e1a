"""Whole-episode windows (REINFORCE, GRPO across chunks): which steps a window trains,
the carried chunks, and the losses restricted to those steps (known answers)."""

import jax.numpy as jnp
import numpy as np

from distrl.agents import advantages as adv_lib
from distrl.agents import episodes
from distrl.types import Transition


def _chunk(last, reward=None):
    """A Transition [T, 1] with the given episode ends and rewards (obs = step index)."""
    last = np.asarray(last, bool)[:, None]
    t = last.shape[0]
    reward = np.zeros(t, np.float32) if reward is None else np.asarray(reward, np.float32)
    obs = np.arange(t, dtype=np.float32)[:, None, None]
    return Transition(
        observation=jnp.asarray(obs),
        action=jnp.zeros((t, 1), jnp.int32),
        reward=jnp.asarray(reward[:, None]),
        discount=jnp.ones((t, 1)),
        last=jnp.asarray(last),
        next_observation=jnp.asarray(obs),
        extras={"log_prob": jnp.zeros((t, 1)), "value": jnp.zeros((t, 1))},
    )


def test_owned_steps_are_whole_episodes_ending_in_the_newest_chunk():
    last = jnp.array([0, 1, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0], bool)
    # episodes: [0..1] (begun before the window), [2..4] (ends before the newest 4),
    # [5..8] (ends at 8, in the newest chunk: owned), [9..11] (still running)
    np.testing.assert_array_equal(
        episodes.owned_steps(last, 4), [0, 0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0]
    )


def test_windows_train_every_fitting_episode_exactly_once():
    """Chunks of T=4 through windows of W=3: each step of an episode that fits is owned
    by exactly one window, the one written when its episode ended."""
    ends = [0, 0, 1, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 1, 0]  # 4 chunks of 4 steps
    chunks = [_chunk(ends[i : i + 4]) for i in range(0, 16, 4)]
    owned_by = np.zeros(16)
    previous = episodes.pad(chunks[0], 2)
    for k, chunk in enumerate(chunks):
        item, previous = episodes.window(previous, chunk)
        assert item.reward.shape == (12, 1) and previous.reward.shape == (8, 1)
        steps = np.arange(12) + 4 * (k - 2)  # global step index of each window position
        owned = np.asarray(item.extras["owned"][:, 0]) / 3  # weight W = 3 on trained steps
        np.testing.assert_array_equal(owned[:8][steps[:8] < 0], 0)  # padding never trains
        for step, mark in zip(steps, owned):
            owned_by[int(step)] += mark if step >= 0 else 0
    # episodes: 0..2 (ends in chunk 0), 3..7, 8..8, 9..14 (each fits in 3 chunks); 15 runs on
    np.testing.assert_array_equal(owned_by, [1] * 15 + [0])


def test_reinforce_and_grpo_use_only_owned_steps():
    """Known answers on one window: REINFORCE advantages are the Monte-Carlo returns of
    owned steps over their share; GRPO's group is the owned episodes only."""
    item, _ = episodes.window(
        episodes.pad(_chunk([0, 0, 0, 0]), 1), _chunk([0, 1, 0, 1], reward=[0, 1, 0, -1])
    )
    owned = np.asarray(item.extras["owned"][:, 0])
    np.testing.assert_array_equal(owned, [0, 0, 0, 0, 2, 2, 2, 2])  # W = 2 on trained steps
    adv = jnp.array([[0.5], [0.5], [0.5], [0.5], [0.9], [1.0], [-0.9], [-1.0]])
    np.testing.assert_allclose(
        adv_lib.owned_only(adv, item)[:, 0], [0, 0, 0, 0, 1.8, 2.0, -1.8, -2.0], rtol=1e-6
    )
    grpo_adv, weights, group = adv_lib.grpo(item, gamma=1.0)
    assert float(group) == 2  # the two owned episodes, returns +1 and -1: z-scores +-1
    np.testing.assert_allclose(grpo_adv[:, 0], [0, 0, 0, 0, 1, 1, -1, -1], atol=1e-5)
    np.testing.assert_array_equal(weights[:, 0], owned > 0)


def test_each_preset_has_one_pipeline():
    from distrl import agents
    from distrl import config as config_lib
    from distrl import experiment as experiment_lib

    expected = dict(
        dqn="REPLAY",
        tabular="REPLAY",
        a2c="CHUNKS",
        vtrace="CHUNKS",
        ppo="CHUNKS",
        reinforce="EPISODES",
        grpo="EPISODES",
        sac="REPLAY",
        td3="REPLAY",
        r2d2="SEQUENCES",
    )
    assert set(expected) == set(agents.PRESETS)
    for name, pipeline in expected.items():
        assert agents.make_config(name).pipeline is agents.PipelineKind[pipeline], name
        config = config_lib.base_config(name)
        assert experiment_lib.Experiment(config).pipeline.kind is agents.PipelineKind[pipeline], (
            name
        )
        long_chunks = pipeline == "EPISODES"  # whole episodes: a longer default T
        assert config.actor.unroll_length == (64 if long_chunks else 16), name
