"""R2D2 on the sequence pipeline (issue 39 item 2): the actor's sequences (known
answers), the memory estimate, and the single-process trainer and a program under
test_mt (real Reverb and courier nodes) learning MemoryChain, a task that needs memory
(a feed-forward policy stays at chance: docs/learning.md). The loss pieces:
tests/test_agents_r2d2.py; items through Reverb: tests/test_replay.py."""

import jax
import numpy as np
from conftest import load_config

from distrl import config as config_lib
from distrl import experiment as experiment_lib
from distrl import local, metrics, pipelines, resources
from distrl.program import launcher as program
from distrl.types import CoreChunk, Transition


def _chunk(index: int, period: int = 4, envs: int = 2) -> CoreChunk:
    """Chunk `index` [P, B]: observations t * 10 + b (t the env step since the start),
    its start state index + 0.5 for each env."""
    t = np.arange(index * period, (index + 1) * period)[:, None]
    obs = (t * 10 + np.arange(envs)[None]).astype(np.float32)[..., None]  # [P, B, 1]
    flat = np.zeros((period, envs), np.float32)
    steps = Transition(obs, flat.astype(np.int32), flat, flat, flat.astype(bool), obs, {})
    return CoreChunk(steps, (np.full((1, envs, 3), index + 0.5, np.float32),))


def test_sequences_start_every_period_with_their_first_steps_state():
    """L = 10 from chunks of P = 4: each sequence spans W = 3 chunks, so the first two
    chunks write nothing; then each chunk completes one sequence per env, starting
    two chunks back, with that chunk's stored state."""
    config = config_lib.base_config("r2d2")
    config.actor.unroll_length, config.replay.sequence_length = 4, 10
    items = pipelines.Sequences().item_fn(
        experiment_lib.Experiment(config).agent_config, config, None
    )
    tail, written = None, []
    for i in range(4):
        out, tail = items(tail, _chunk(i))
        written.append(jax.device_get(out))
    assert [len(out.chunk.reward) for out in written] == [0, 0, 2, 2]
    for i, out in ((2, written[2]), (3, written[3])):
        start = i - 2
        np.testing.assert_array_equal(  # env b's steps 4 * start .. 4 * start + 9
            out.chunk.observation[..., 0],
            (np.arange(4 * start, 4 * start + 10)[None] * 10 + np.arange(2)[:, None]),
        )
        np.testing.assert_array_equal(out.core_state[0], np.full((2, 1, 3), start + 0.5))
    assert len(tail) == 2  # the W - 1 chunks the next sequence starts in


def test_the_memory_estimate_counts_sequences_and_the_network():
    """The table at its fullest: replay.max_size / P sequences of L steps (observations
    twice, action, reward, discount, last) with the GRU state and the version; the
    parameters: torso, GRU and Q head, exactly."""
    config = load_config("r2d2_memory_chain")
    env = experiment_lib.Experiment(config).env
    pipeline = experiment_lib.Experiment(config).pipeline
    length, period, size = 32, 16, config.agent.core_size
    obs_bytes = env.spec.obs_size * np.dtype(env.spec.observation_dtype).itemsize
    per_item = length * (2 * obs_bytes + 4 + 4 + 4 + 1) + 4 * size + 4
    assert pipeline.item_bytes(config, env) == per_item
    stored, _ = resources.estimate_memory(experiment_lib.Experiment(config)).parts["replay"]
    assert stored == config.replay.max_size // period * per_item
    agent = experiment_lib.Experiment(config).agent
    count = sum(x.size for x in jax.tree.leaves(agent.init(jax.random.PRNGKey(0)).params))
    assert resources.param_count(agent.config, env.spec.observation_shape, 2) == count


def test_local_r2d2_learns_memory_chain():
    """configs/r2d2_memory_chain.py (memory 10) single-process: the greedy return's 95%
    lower bound over 1,000 episodes reaches 0.9 (8,960 env steps on seed 13)."""
    config = load_config("r2d2_memory_chain")
    config.budget.update(dict(env_steps=150_000, seconds=0.0))
    result = local.train(config)
    assert result.solved and result.return_low >= 0.9, result


def test_r2d2_learns_in_a_program_with_prioritized_sequences(run_dir, warm_python):
    """The preset under test_mt with prioritized replay (importance weights per
    sequence, priorities eta max + (1 - eta) mean |td| written back): the evaluator
    confirms 0.9 from a first evaluation at chance, and launch/evaluate.py plays the
    saved policy through its core and scores it as the evaluator did."""
    config = load_config("r2d2_memory_chain")
    config.run_dir = run_dir
    config.replay.sampler = "prioritized"
    config.budget.update(dict(env_steps=300_000, seconds=120.0))
    result, out_dir = program.run(config, "test_mt")
    assert result["stop_reason"] == "target_reached", result
    assert result["evaluation"]["return_low"] >= 0.9
    returns = metrics.read_csv(metrics.csv_path(out_dir, "evaluator"))["mean_return"]
    assert returns[0] < 0.5, returns  # it learned: the first policy is near chance (0)
    assert result["data"]["items_learned"] > 0 and result["counts"]["learner_steps"] > 0
    figures = warm_python.evaluated(out_dir, 200)
    assert figures["evaluation"]["episodes"] == 200
    assert figures["evaluation"]["return_low"] >= 0.9, figures
