"""Rollout: shapes, continuity across resets, episode statistics, carried state."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from distrl import agents
from distrl.acting import rollout
from distrl.envs import make_env
from distrl.pyenv import EnvError
from tests import user_envs

ENV = make_env("4x4")
# Shortest safe route 0 -> 1 -> 2 -> 6 -> 10 -> 14 -> 15: RIGHT, RIGHT, DOWN, DOWN, DOWN, RIGHT.
ROUTE = np.zeros(16, np.int32)
ROUTE[[0, 1, 14]] = 2
ROUTE[[2, 6, 10]] = 1


def scripted_policy(params, key, observations, epsilon):
    """Follows the route table: obs [B, O] -> actions [B]; extras mimic AC."""
    del params, key, epsilon
    actions = jnp.asarray(ROUTE)[jnp.argmax(observations, axis=-1)]
    return actions, {"log_prob": jnp.zeros(actions.shape), "value": jnp.ones(actions.shape)}


def test_scripted_route_known_stats():
    run = rollout.make_rollout(ENV, scripted_policy, 12)
    carry = rollout.init_carry(ENV, jax.random.PRNGKey(0), 3)
    carry, traj, stats = run(None, carry, jax.random.PRNGKey(1), 0.0)
    assert traj.observation.shape == (12, 3, 16) and traj.action.shape == (12, 3)
    assert traj.extras["log_prob"].shape == (12, 3)
    # Every env reaches G in 6 steps, twice.
    assert int(stats.env_steps) == 36
    assert int(stats.episodes) == 6 and int(stats.successes) == 6
    assert float(stats.return_sum) == 6.0 and int(stats.length_sum) == 36
    np.testing.assert_array_equal(traj.last[:, 0], [0, 0, 0, 0, 0, 1] * 2)
    np.testing.assert_array_equal(traj.discount[:, 0], [1, 1, 1, 1, 1, 0] * 2)
    np.testing.assert_array_equal(jnp.argmax(traj.next_observation[5], -1), [15] * 3)  # pre-reset
    np.testing.assert_array_equal(jnp.argmax(traj.observation[6], -1), [0] * 3)  # reset to S
    np.testing.assert_array_equal(carry.episode_length, [0] * 3)


def test_carry_continues_between_calls():
    long = rollout.make_rollout(ENV, scripted_policy, 10)
    short = rollout.make_rollout(ENV, scripted_policy, 5)
    carry0 = rollout.init_carry(ENV, jax.random.PRNGKey(0), 2)
    _, whole, _ = long(None, carry0, jax.random.PRNGKey(1), 0.0)
    carry, first, _ = short(None, carry0, jax.random.PRNGKey(1), 0.0)
    np.testing.assert_array_equal(carry.episode_length, [5, 5])
    carry, second, stats2 = short(None, carry, jax.random.PRNGKey(2), 0.0)
    joined = jax.tree.map(lambda a, b: jnp.concatenate([a, b]), first, second)
    jax.tree.map(np.testing.assert_array_equal, joined, whole)
    assert int(stats2.episodes) == 2 and int(stats2.length_sum) == 12  # episodes began in call 1


def test_random_agent_continuity_and_stats():
    agent = agents.make_agent(agents.make_config("dqn", hidden_sizes=(8,)), ENV)
    params = agent.init(jax.random.PRNGKey(0)).params
    run = rollout.make_rollout(ENV, agent.policy, 64)
    carry = rollout.init_carry(ENV, jax.random.PRNGKey(0), 8)
    _, traj, stats = run(params, carry, jax.random.PRNGKey(3), 1.0)
    assert traj.extras == {}
    cell = np.asarray(jnp.argmax(traj.observation, -1))
    next_cell = np.asarray(jnp.argmax(traj.next_observation, -1))
    last = np.asarray(traj.last)
    # Within an episode the next input is the cell reached; after an end it is S.
    np.testing.assert_array_equal(np.where(last[:-1], 0, next_cell[:-1]), cell[1:])
    assert int(stats.episodes) == last.sum() > 0
    ended_on_goal = last & (next_cell == 15)
    assert int(stats.successes) == ended_on_goal.sum()
    # Rewards come only at episode ends here, and all episodes began inside the chunk.
    np.testing.assert_allclose(float(stats.return_sum), float(np.sum(traj.reward)))
    assert run._cache_size() == 1
    run(params, carry, jax.random.PRNGKey(4), 0.5)
    assert run._cache_size() == 1


def _nan_above(threshold: float):
    """A Box policy acting 0.5, but NaN where the observation's first element (the
    Target env's target) is above `threshold`."""

    def policy(params, key, observations, epsilon):
        del params, key, epsilon
        bad = observations[:, :1] > threshold
        return jnp.where(bad, jnp.nan, 0.5) * jnp.ones(observations.shape), {}

    return policy


def test_the_first_nonfinite_action_of_a_chunk_is_found_inside_the_jit():
    """The rollout marks the chunk's first step (t * B + b) whose action is not finite;
    `rollout.check_actions` (the actor's) turns it into an EnvError naming the env, its
    copy and the copy's step.
    A chunk of finite actions, and one of integer actions, are marked -1."""
    env = user_envs.make_target(shape=(2,), length=50)
    carry = rollout.init_carry(env, jax.random.PRNGKey(0), 3)
    _, traj, stats = rollout.make_rollout(env, _nan_above(1.5), 8)(
        None, carry, jax.random.PRNGKey(1), 0.0
    )
    bad = np.asarray(traj.observation[..., 0] > 1.5)  # [T, B]
    assert bad.any() and not bad.all()  # the seed's targets cross the threshold
    t, b = np.argwhere(bad)[0]
    assert int(stats.first_nonfinite_action) == t * 3 + b
    assert np.isnan(traj.action[t, b]).all()
    with pytest.raises(EnvError) as err:
        rollout.check_actions(
            stats.first_nonfinite_action, "tests.user_envs:make_target", "actor 1", 3, 16
        )
    assert str(err.value) == (
        f"env tests.user_envs:make_target (actor 1, copy {b}) at step {16 + t + 1}: the "
        f"policy's action is not finite (its params diverged)"
    )
    _, _, fine = rollout.make_rollout(env, _nan_above(9.0), 8)(
        None, carry, jax.random.PRNGKey(1), 0.0
    )
    assert int(fine.first_nonfinite_action) == -1
    rollout.check_actions(fine.first_nonfinite_action, "tests.user_envs:make_target", "actor 1", 3)
    grid = rollout.init_carry(ENV, jax.random.PRNGKey(0), 3)
    _, _, discrete = rollout.make_rollout(ENV, scripted_policy, 4)(
        None, grid, jax.random.PRNGKey(1), 0.0
    )
    assert int(discrete.first_nonfinite_action) == -1
