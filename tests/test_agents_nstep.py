"""n-step transitions: known answers for plain windows, termination and truncation."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from distrl.agents import nstep
from distrl.types import Transition

GAMMA = 0.5
O = 16


def make_traj(rewards, last, discount):
    """One env [T]: obs one-hot(t), next_obs one-hot(10 + t), action t."""
    t = len(rewards)
    return Transition(
        observation=jax.nn.one_hot(jnp.arange(t), O),
        action=jnp.arange(t, dtype=jnp.int32),
        reward=jnp.asarray(rewards, jnp.float32),
        discount=jnp.asarray(discount, jnp.float32),
        last=jnp.asarray(last, bool),
        next_observation=jax.nn.one_hot(10 + jnp.arange(t), O),
        extras={},
    )


def cells(obs):
    return np.asarray(jnp.argmax(obs, axis=-1))


def test_no_episode_end():
    traj = make_traj([1, 2, 3, 4, 5], [0] * 5, [1] * 5)
    q = nstep.n_step_transitions(traj, 3, GAMMA)
    np.testing.assert_allclose(q.reward, [1 + 0.5 * 2 + 0.25 * 3, 2 + 1.5 + 1.0, 3 + 2 + 1.25])
    np.testing.assert_allclose(q.discount, [0.125] * 3)
    np.testing.assert_array_equal(cells(q.next_observation), [12, 13, 14])
    np.testing.assert_array_equal(cells(q.observation), [0, 1, 2])
    np.testing.assert_array_equal(q.action, [0, 1, 2])


def test_termination_inside_window_does_not_bootstrap():
    traj = make_traj([1, 2, 3, 4, 5], [0, 1, 0, 0, 0], [1, 0, 1, 1, 1])
    q = nstep.n_step_transitions(traj, 3, GAMMA)
    np.testing.assert_allclose(q.reward, [1 + 0.5 * 2, 2, 3 + 2 + 1.25])
    np.testing.assert_allclose(q.discount, [0.0, 0.0, 0.125])
    np.testing.assert_array_equal(cells(q.next_observation), [11, 11, 14])


def test_truncation_inside_window_bootstraps_from_final_obs():
    traj = make_traj([1, 2, 3, 4, 5], [0, 1, 0, 0, 0], [1, 1, 1, 1, 1])
    q = nstep.n_step_transitions(traj, 3, GAMMA)
    np.testing.assert_allclose(q.reward, [2.0, 2.0, 6.25])
    np.testing.assert_allclose(q.discount, [0.25, 0.5, 0.125])
    np.testing.assert_array_equal(cells(q.next_observation), [11, 11, 14])


def test_batched_over_envs_matches_single():
    cases = [([1, 2, 3, 4], [0, 0, 1, 0], [1, 1, 0, 1]), ([0, 1, 0, 1], [1, 0, 0, 1], [1, 1, 1, 1])]
    trajs = [make_traj(*c) for c in cases]
    batch = jax.tree.map(lambda *xs: jnp.stack(xs, axis=1), *trajs)  # [T, B]
    q = nstep.n_step_transitions(batch, 2, GAMMA)
    for b, traj in enumerate(trajs):
        single = nstep.n_step_transitions(traj, 2, GAMMA)
        column = jax.tree.map(lambda x, b=b: x[:, b], q)
        jax.tree.map(np.testing.assert_allclose, column, single)


def test_image_observations_match_their_flattened_form():
    """Observations of any rank (MinAtar's [10, 10, C]): the same windows as flat ones."""
    traj = make_traj([1, 2, 3, 4, 5], [0, 1, 0, 0, 1], [1, 0, 1, 1, 1])
    batch = jax.tree.map(lambda x: jnp.stack([x, x], axis=1), traj)  # [T, B=2]
    images = batch._replace(
        observation=batch.observation.reshape(5, 2, 4, 4),
        next_observation=batch.next_observation.reshape(5, 2, 4, 4),
    )
    flat, image = (nstep.n_step_transitions(t, 3, GAMMA) for t in (batch, images))
    assert image.next_observation.shape == (3, 2, 4, 4)
    np.testing.assert_array_equal(image.next_observation.reshape(3, 2, O), flat.next_observation)
    np.testing.assert_allclose(image.discount, flat.discount)


def test_n1_is_one_step():
    traj = make_traj([1, 2, 3], [0, 1, 0], [1, 0, 1])
    q = nstep.n_step_transitions(traj, 1, 0.9)
    np.testing.assert_allclose(q.reward, [1, 2, 3])
    np.testing.assert_allclose(q.discount, [0.9, 0.0, 0.9])
    np.testing.assert_array_equal(cells(q.next_observation), [10, 11, 12])


def test_carried_tail_emits_every_step_once():
    rewards = [1, 0, 2, 0, 3, 1, 0, 1, 2, 0]
    last = [0, 0, 1, 0, 0, 0, 1, 0, 0, 0]
    traj = make_traj(rewards, last, [1] * 10)
    n = 3
    whole = nstep.n_step_transitions(traj, n, GAMMA)  # [8]
    first = jax.tree.map(lambda x: x[:4], traj)
    second = jax.tree.map(lambda x: x[4:], traj)
    part1 = nstep.n_step_transitions(first, n, GAMMA)  # starts 0, 1
    part2 = nstep.n_step_transitions(nstep.concat_tail(nstep.tail(first, n), second), n, GAMMA)
    joined = jax.tree.map(lambda a, b: jnp.concatenate([a, b]), part1, part2)
    jax.tree.map(np.testing.assert_allclose, joined, whole)


def test_rejects_bad_n():
    traj = make_traj([1, 2], [0, 0], [1, 1])
    with pytest.raises(ValueError):
        nstep.n_step_transitions(traj, 3, GAMMA)
