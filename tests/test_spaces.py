"""Action spaces (`distrl.spaces`): what an env declares, the one scaling from a
policy's [-1, 1] onto a Box, and the agents' refusal of a space they cannot act in."""

import jax.numpy as jnp
import numpy as np
import pytest

from distrl import agents, envs, spaces
from distrl.envs import gymnax_env, host_env
from tests import user_envs


def test_a_box_scales_the_policy_range_onto_its_bounds():
    box = spaces.box((2,), [-2.0, 0.0], [2.0, 10.0])
    policy = np.array([[-1.0, -1.0], [0.0, 0.5], [1.0, 1.0]], np.float32)
    want = np.array([[-2.0, 0.0], [0.0, 7.5], [2.0, 10.0]], np.float32)
    np.testing.assert_allclose(box.to_env(policy), want)
    np.testing.assert_allclose(box.to_env(jnp.asarray(policy)), want)  # inside a jit too
    assert box.problem(want[1]) is None
    assert "non-finite" in box.problem(box.to_env(np.array([np.nan, 0.0])))
    assert "outside the Box" in box.problem(np.array([0.0, 11.0]))
    assert "shape" in box.problem(np.array([0.0]))


def test_a_discrete_action_reaches_the_env_as_is():
    space = spaces.Discrete(3)
    assert space.to_env(2) == 2 and space.shape == () and space.dtype == "int32"
    assert space.problem(2) is None and "outside" in space.problem(3)


@pytest.mark.parametrize(
    ("low", "high", "why"),
    [(-np.inf, 1.0, "not finite"), (0.0, np.nan, "not finite"), (1.0, 1.0, "low < high")],
)
def test_a_box_without_finite_ordered_bounds_is_refused(low, high, why):
    with pytest.raises(ValueError, match=why):
        spaces.box((1,), low, high)


def test_spaces_are_hashable_and_compare_by_value():
    assert hash(spaces.box((1,), -2, 2)) == hash(spaces.box((1,), -2.0, 2.0))
    assert spaces.Discrete(2) != spaces.box((1,), -1, 1)


def test_the_env_spec_says_its_actions():
    discrete = envs.EnvSpec((4,), "float32", 3, 10)
    assert discrete.actions == spaces.Discrete(3)
    assert (discrete.action_shape, discrete.action_dtype) == ((), "int32")
    box = envs.EnvSpec((3,), "float32", 0, 10, spaces.box((2,), -1, 1))
    assert (box.action_shape, box.action_dtype) == ((2,), "float32")


def test_gymnax_reads_its_own_action_space():
    pendulum = gymnax_env.make("Pendulum-v1").spec
    assert pendulum.actions == spaces.box((1,), -2.0, 2.0) and pendulum.num_actions == 0
    assert gymnax_env.make("CartPole-v1").spec.actions == spaces.Discrete(2)


def test_a_gymnasium_box_action_space_becomes_the_spec():
    env = host_env.make("gymnasium:Pendulum-v1", {})
    assert env.spec.actions == spaces.box((1,), -2.0, 2.0)
    buffer = env.action_buffer(2)
    env.env_actions_into(np.array([[1.0], [-0.5]], np.float32), buffer)
    np.testing.assert_allclose(buffer, [[2.0], [-1.0]])


def test_env_step_scales_the_policy_action_at_the_env():
    env = user_envs.make_target(low=-2.0, high=2.0)
    state, _ = env.reset(np.zeros(2, np.uint32))
    target = np.asarray(state[0])
    _, ts = envs.env_step(env, state, jnp.asarray(target / 2.0), np.zeros(2, np.uint32))
    np.testing.assert_allclose(ts.reward, 0.0, atol=1e-6)  # policy a = target / 2


@pytest.mark.parametrize(
    ("algorithm", "spec", "message"),
    [
        ("dqn", envs.EnvSpec((3,), "float32", 0, 5, spaces.box((1,), -2, 2)), "acts in Discrete"),
        ("tabular", envs.EnvSpec((3,), "float32", 0, 5, spaces.box((1,), -2, 2)), "Discrete"),
        (
            "ppo",
            envs.EnvSpec((3,), "float32", 0, 5, spaces.box((2, 2), -1, 1)),
            "one axis of actions",
        ),
    ],
)
def test_an_agent_refuses_actions_it_cannot_take(algorithm, spec, message):
    with pytest.raises(ValueError, match=message):
        agents.check_actions(agents.make_config(algorithm), spec)


def test_policy_gradient_agents_take_both_kinds():
    for algorithm in ("ppo", "a2c"):
        config = agents.make_config(algorithm)
        agents.check_actions(config, envs.EnvSpec((3,), "float32", 2, 5))
        agents.check_actions(config, envs.EnvSpec((3,), "float32", 0, 5, spaces.box((1,), -1, 1)))
