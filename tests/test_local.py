"""Single-process trainer: replay buffer, and every algorithm solving the 4x4 map.

Each learning run is one fused, jitted call (a few seconds, mostly compilation):
greedy success rate 1.0 from S on the non-slippery 4x4 map, fixed seeds and budgets.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from distrl import agents, local
from distrl.agents import replay_buffer
from distrl.types import QTransition


def items(values):
    v = jnp.asarray(values, jnp.float32)
    obs = jnp.stack([v, -v], axis=-1)
    return QTransition(obs, v.astype(jnp.int32), v, v, obs)


def test_replay_add_wraps_and_samples_filled_slots():
    buffer = replay_buffer.replay_init(jax.tree.map(lambda x: x[0], items([0.0])), 4)
    buffer = replay_buffer.replay_add(buffer, items([1, 2, 3]))
    assert int(buffer.size) == 3 and int(buffer.position) == 3
    np.testing.assert_array_equal(buffer.data.reward, [1, 2, 3, 0])
    buffer = replay_buffer.replay_add(buffer, items([4, 5]))  # overwrites the oldest
    assert int(buffer.size) == 4 and int(buffer.position) == 1
    np.testing.assert_array_equal(buffer.data.reward, [5, 2, 3, 4])
    np.testing.assert_array_equal(buffer.data.observation[:, 1], [-5, -2, -3, -4])
    sample = replay_buffer.replay_sample(buffer, jax.random.PRNGKey(0), 256)
    assert sample.observation.shape == (256, 2)
    assert set(np.asarray(sample.reward).tolist()) == {2.0, 3.0, 4.0, 5.0}
    np.testing.assert_array_equal(sample.observation[:, 0], sample.reward)  # rows stay whole


def test_sample_only_from_filled_slots():
    buffer = replay_buffer.replay_init(jax.tree.map(lambda x: x[0], items([0.0])), 100)
    buffer = replay_buffer.replay_add(buffer, items([7, 8]))
    sample = replay_buffer.replay_sample(buffer, jax.random.PRNGKey(1), 64)
    assert set(np.asarray(sample.reward).tolist()) == {7.0, 8.0}


@pytest.mark.parametrize(
    "algo, budget",
    [("dqn", 60_000), ("tabular", 30_000), ("a2c", 30_000), ("ppo", 30_000), ("grpo", 30_000)],
)
def test_solves_4x4(algo, budget):
    result = local.train(local.LocalConfig(algo=algo, max_env_steps=budget, seed=0))
    assert result.solved, result
    assert result.success_rate == 1.0 and result.mean_length == 6.0
    assert 0 < result.env_steps <= budget + 64 * 16
    assert result.updates > 0 and result.episodes > 0
    assert result.report.splitlines()[-1].endswith("G")


def test_n_step_dqn_runs_and_counts_warmup():
    cfg = local.LocalConfig(algo="dqn", max_env_steps=2_000, target_success=2.0, seed=1)
    result = local.train(cfg, agents.make_config("dqn", n_step=3, hidden_sizes=(16,)))
    assert not result.solved  # unreachable target: runs the whole budget
    # 2 warm-up steps of 16 envs, then chunks of 16 x 16 until the budget is passed.
    assert result.env_steps == 2 * 16 + 8 * 256
    assert result.updates == 8 * 4  # min replay (256) is reached in the first chunk


def test_main_prints_summary(capsys):
    result = local.main(["--algo", "tabular", "--max-env-steps", "20000", "--quiet"])
    out = capsys.readouterr().out
    assert result.solved and "tabular on 4x4: solved=True" in out and "greedy policy:" in out


def test_deterministic_map_evaluates_one_exact_episode():
    result = local.train(local.LocalConfig(algo="tabular", max_env_steps=30_000, seed=0))
    assert result.solved and result.eval_episodes == 1
    assert result.success_low == result.success_high == 1.0
    assert result.exact["success"] == 1.0 and result.exact["ratio"] == 1.0
    assert result.exact["optimal_value"] == pytest.approx(0.9**5)  # 6 steps, discount 0.9


def test_slippery_stop_rule_needs_the_lower_bound():
    """Slippery 4x4: no policy reaches 0.9 (the best is 0.744). 8-episode evaluations
    of near-optimal policies often show 1.0, but only a confirm_envs-episode one can
    solve the run, and the final figure is such an evaluation."""
    cfg = local.LocalConfig(
        algo="tabular", slippery=True, max_env_steps=40_000, target_success=0.9, eval_envs=8,
        confirm_envs=2000, seed=0,
    )
    result = local.train(cfg)
    assert not result.solved and result.env_steps >= 40_000
    assert result.eval_episodes == 2000 and result.success_high < 0.9
    assert result.exact["max_success"] < 0.745


def test_slippery_target_of_optimal_is_confirmed_and_exact():
    cfg = local.LocalConfig(
        algo="tabular", slippery=True, max_env_steps=400_000, target_of_optimal=0.95, seed=0
    )
    result = local.train(cfg)
    assert result.solved, result
    assert result.target == pytest.approx(0.95 * result.exact["optimal_success"])
    assert result.eval_episodes == 10_000 and result.success_low >= result.target
    assert result.exact["success"] >= result.target - 0.02  # the exact figure agrees
