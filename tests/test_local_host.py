"""The single-process trainer on envs stepped in Python (`distrl.local_host`): real
gymnasium envs, the real jitted data step, learning judged as `distrl.local` judges."""

import pytest
from conftest import load_config

from distrl import config as config_lib
from distrl import local


def configured(name: str, **values):
    """configs/<name>.py with `values` set by their dotted paths."""
    config = load_config(name)
    config.update_from_flattened_dict(values)
    return config


def test_dqn_solves_gymnasium_frozenlake_judged_on_its_own_tables():
    """DQN on gymnasium's FrozenLake-v1 4x4 without slips in one process: it confirms a
    success lower bound of 0.999 over 10,000 host episodes, and the exact figures come
    from gymnasium's transition tables (the optimum succeeds with 1.0; V*(S) = 0.9^5)."""
    config = configured(
        "dqn",
        **{
            "env.name": "gymnasium:FrozenLake-v1",
            "env.kwargs": '{"is_slippery": false}',
            # an env stepped in Python declares no determinism: a Wilson bound, never 1.0
            "evaluator.target_success": 0.999,
            "evaluator.num_envs": 100,
            "budget.env_steps": 300_000,
        },
    )
    result = local.train(config)
    assert result.solved, result
    assert result.eval_episodes == 10_000 and result.success_low >= 0.999
    assert result.exact["optimal_success"] == 1.0 and result.exact["success"] == 1.0
    assert result.exact["optimal_value"] == pytest.approx(0.9**5)
    assert result.report  # FrozenLake is a grid: value and arrow grids
    assert result.env_steps < 300_000 and result.updates > 0
    assert [e[0] for e in result.evaluations] == sorted(e[0] for e in result.evaluations)


def test_sac_on_gymnasium_pendulum_stops_at_its_budget_with_the_replay_ratio():
    """SAC on gymnasium's Pendulum-v1 to a budget of 2,048 env steps: the loop stops at the
    budget, takes samples_per_insert x T x B / batch updates per iteration once the
    buffer holds replay.min_size, evaluates at the evaluator's cadence, and reports the
    last policy on confirm_envs episodes."""
    config = configured(
        "sac_gymnasium_pendulum",
        **{
            "budget.env_steps": 2_048,
            "replay.min_size": 512,
            "evaluator.every_env_steps": 512,
            "evaluator.num_envs": 4,
            "evaluator.confirm_envs": 8,
            "agent.hidden_sizes": (16, 16),  # the loop is judged here, not the learning
            "learner.batch_size": 16,
        },
    )
    experiment_steps = config.num_actors * config.actor.num_envs * config.actor.unroll_length
    result = local.train(config)
    assert result.env_steps == 2_048 and result.iterations == 2_048 // experiment_steps
    per_iteration = round(
        config.replay.samples_per_insert * experiment_steps / config.learner.batch_size
    )
    waited = -(-512 // experiment_steps) - 1  # iterations before the buffer held 512
    assert result.updates == per_iteration * (result.iterations - waited)
    assert [e[0] for e in result.evaluations] == [512, 1024, 1536, 2048]
    assert result.eval_episodes == 8 and -2_000 < result.mean_return < 0
    assert not result.solved and not result.report


def test_a_warm_up_rollout_is_refused_for_an_env_stepped_in_python():
    """n-step DQN's single-process data step starts with n - 1 steps of a JAX env's
    rollout: refused before anything compiles, naming the value."""
    config = configured("dqn_gymnasium_cartpole", **{"agent.n_step": 3})
    with pytest.raises(config_lib.ConfigError, match=r"agent.n_step=3's first window"):
        local.train(config)


def test_copies_in_subprocesses_are_refused():
    """env.vector=async: a killed trainer's subprocess copies would outlive it (the
    actors' are stopped by their supervisor); refused before anything starts."""
    config = configured("ppo_gymnasium_cartpole", **{"env.vector": "async"})
    with pytest.raises(config_lib.ConfigError, match=r"config.env.vector='async'"):
        local.train(config)
