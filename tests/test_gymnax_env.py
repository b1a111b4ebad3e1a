"""gymnax environments by name (`config.env.name=gymnax:<id>`, `distrl.envs.gymnax_env`):
the interface contract, termination and truncation read apart (gymnax's own `step`
merges them into one reset), the rollout, and the single-process trainer on
CartPole-v1; a user's own gymnax-style env (`tests/gymnax_user_envs.py`, an Environment
or gymnax.make's (env, params) pair) through `module:factory`, trained in the single-
process trainer (tests/test_user_env.py trains one in the distributed program). gymnax is
pinned in both locks; a venv made before the pin (`make setup` not rerun) skips this
file. Part of the core's tests (`make test-core`): nothing here needs Launchpad."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import load_config
from test_env_interface import _check_contract

pytest.importorskip("gymnax")

from distrl import config as config_lib  # noqa: E402
from distrl import envs, local  # noqa: E402
from distrl import experiment as experiment_lib  # noqa: E402
from distrl.acting import evaluation, rollout  # noqa: E402
from distrl.envs import gymnax_env  # noqa: E402

KEY = jax.random.PRNGKey(0)
IDS = ["CartPole-v1", "Acrobot-v1", "Breakout-MinAtar", "SpaceInvaders-MinAtar",
       "Asterix-MinAtar", "Freeway-MinAtar"]  # fmt: skip


@pytest.mark.parametrize("env_id", IDS)
def test_gymnax_envs_meet_the_contract_with_no_capability(env_id):
    env = gymnax_env.make(env_id)
    _check_contract(env, batch=2, steps=5, rtol=1e-5)
    assert env == gymnax_env.make(env_id) and hash(env) == hash(gymnax_env.make(env_id))
    assert envs.success_signal(env) is None and envs.tabular_model(env) is None


def test_cartpole_termination_and_truncation_are_apart():
    env = gymnax_env.make("CartPole-v1")
    state, _ = env.reset(KEY)
    steps = 0
    while True:  # always right: the pole falls (terminated) well before 500 steps
        state, ts = env.step(state, 1, KEY)
        steps += 1
        if bool(ts.last):
            break
    assert bool(ts.terminated) and not bool(ts.truncated) and float(ts.discount) == 0.0
    assert steps < 50
    short = gymnax_env.make("CartPole-v1", max_steps_in_episode=3)
    assert short.spec.time_limit == 3
    state, _ = short.reset(KEY)
    for action in (0, 1, 0):  # balanced: still up at the limit
        state, ts = short.step(state, action, KEY)
    assert bool(ts.truncated) and not bool(ts.terminated) and float(ts.discount) == 1.0
    # the observation reached, not a reset one: the cart has moved
    assert float(jnp.abs(ts.observation).sum()) > 0
    np.testing.assert_array_equal(ts.observation, short.observe(state))


def test_rollout_resets_each_cartpole_episode_once():
    env = gymnax_env.make("CartPole-v1", max_steps_in_episode=4)
    right = lambda params, key, obs, eps: (jnp.ones(obs.shape[:1], jnp.int32), {})  # noqa: E731
    carry = rollout.init_carry(env, KEY, 3)
    _, chunk, stats = rollout.make_rollout(env, right, 12)(None, carry, KEY, 0.0)
    last = np.asarray(chunk.last)
    assert last[3].all() and last[7].all() and last[11].all() and last.sum() == 9
    np.testing.assert_array_equal(np.asarray(chunk.discount)[last], 1.0)  # truncations
    assert int(stats.episodes) == 9 and np.asarray(chunk.reward).sum() == 36


def test_by_name_from_the_config_and_bad_ids_are_config_errors():
    config = load_config("ppo")
    config.env.update(dict(name="gymnax:CartPole-v1", kwargs='{"max_steps_in_episode": 200}'))
    assert experiment_lib.Experiment(config).env == gymnax_env.make(
        "CartPole-v1", max_steps_in_episode=200
    )
    config.env.name = "gymnax:CartPole-v9"
    with pytest.raises(config_lib.ConfigError, match="gymnax has no env 'CartPole-v9'; valid: "):
        experiment_lib.make(config)
    config.env.update(dict(name="gymnax:CartPole-v1", kwargs='{"gravity_x": 1}'))
    with pytest.raises(config_lib.ConfigError, match="params have no"):
        experiment_lib.make(config)


def test_ppo_on_cartpole_learns_in_the_single_process_trainer():
    config = load_config("ppo")
    config.env.name = "gymnax:CartPole-v1"
    config.evaluator.update(
        dict(target_success=0.0, target_return=150.0, num_envs=64, confirm_envs=256)
    )
    config.local.eval_every = 5
    config.budget.update(dict(env_steps=600_000, seconds=400.0))
    result = local.train(config)
    assert result.env_steps > 0 and not result.has_success and result.exact is None
    assert result.solved and result.return_low >= 150.0, result._replace(params=None)
    # learned, not given: the untrained greedy policy balances far shorter
    env = experiment_lib.Experiment(config).env
    agent = experiment_lib.Experiment(config).agent
    untrained = evaluation.make_evaluator(env, agent, 256)(agent.init(KEY).params, KEY)
    assert float(untrained.mean_return) < 100.0


@pytest.mark.parametrize("algorithm", ["dqn", "ppo"])
def test_minatar_image_observations_train_through_both_pipelines(algorithm):
    """Breakout-MinAtar's [10, 10, 4] observations through n-step replay and chunks,
    into the conv torso ("auto" picks it for images)."""
    config = load_config(algorithm)
    config.env.name = "gymnax:Breakout-MinAtar"
    config.agent.conv_channels = (8,)
    config.evaluator.update(dict(target_success=0.0, num_envs=16, confirm_envs=32))
    config.local.eval_every = 10
    config.budget.env_steps = 5_000
    result = local.train(config)
    assert result.env_steps >= 5_000 and result.updates > 0 and result.episodes > 0
    assert result.eval_episodes == 32 and result.return_low <= result.mean_return
    torso = "torso" if algorithm == "dqn" else "policy_torso"
    assert result.params[f"{torso}_conv_0"]["w"].shape == (3, 3, 4, 8)


def test_a_conv_torso_on_cartpole_vectors_is_a_config_error():
    config = load_config("ppo")
    config.env.name = "gymnax:CartPole-v1"
    config.evaluator.target_success = 0.0
    config.agent.torso = "conv"
    with pytest.raises(config_lib.ConfigError, match=r"torso='conv' needs .* shape is \(4,\)"):
        experiment_lib.make(config)


# A user's own gymnax-style env (tests/gymnax_user_envs.py) through `module:factory`.
USER = "tests.gymnax_user_envs"


def _user_config(factory: str, kwargs: str = "{}"):
    """PPO on the gymnax-style contextual bandit (best return: its episode length),
    stopping at a confirmed return of 3.5 of 4."""
    config = load_config("ppo")
    config.env.update(dict(name=f"{USER}:{factory}", kwargs=kwargs))
    config.evaluator.update(
        dict(target_success=0.0, target_return=3.5, num_envs=200, confirm_envs=2_000)
    )
    config.agent.hidden_sizes = (32,)
    config.budget.update(dict(env_steps=400_000, seconds=240.0))
    return config


@pytest.mark.parametrize(
    "factory, kwargs, limit",
    [("make", "{}", 4), ("make_pair", '{"length": 4}', 4), ("make_pair", '{"length": 6}', 6)],
)
def test_a_users_gymnax_env_or_pair_is_adopted_by_name(factory, kwargs, limit):
    config = _user_config(factory, kwargs)
    env = experiment_lib.Experiment(config).env
    assert isinstance(env, gymnax_env.GymnaxEnv) and env == experiment_lib.Experiment(config).env
    assert env.spec.time_limit == limit and env.spec.observation_shape == (3,)
    assert env.spec.num_actions == 3
    _check_contract(env, batch=2, steps=limit + 2)
    # the time limit is gymnax's is_truncated: a truncation that bootstraps
    state, _ = env.reset(KEY)
    for t in range(limit):
        state, ts = env.step(state, 0, jax.random.fold_in(KEY, t))
    assert bool(ts.truncated) and not bool(ts.terminated) and float(ts.discount) == 1.0
    # a process that did not build it (an unpickled env) calls the factory by its name
    gymnax_env._MADE.clear()
    assert env.spec.time_limit == limit and env.step(state, 0, KEY)[1].truncated


@pytest.mark.parametrize(
    "factory, message",
    [
        ("two_numbers", "returned a tuple, not an environment: need spec, reset, step and observe"),
        ("pair_without_a_time_limit", "params (dict) have max_steps_in_episode=None"),
        ("without_an_observation_space", "gymnax-style but raised NotImplementedError"),
    ],
)
def test_a_bad_gymnax_style_answer_is_a_config_error_naming_what_is_valid(factory, message):
    config = _user_config(factory)
    with pytest.raises(config_lib.ConfigError, match=f"config.env.name='{USER}:{factory}'") as err:
        experiment_lib.make(config)
    assert message in str(err.value)
    if factory == "two_numbers":
        assert "a gymnax Environment or the (env, params) pair gymnax.make returns" in str(
            err.value
        )


@pytest.mark.parametrize("factory", ["make", "make_pair"])
def test_a_users_gymnax_env_trains_in_the_single_process_trainer(factory):
    result = local.train(_user_config(factory))
    assert result.solved and result.return_low >= 3.5, result._replace(params=None)
    assert result.eval_episodes == 2_000 and not result.has_success
