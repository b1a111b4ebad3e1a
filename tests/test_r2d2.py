"""R2D2 on the sequence pipeline (issue 39 item 2): the single-process trainer and a
program under test_mt (real Reverb and courier nodes) learn MemoryChain, a task that
needs memory (a feed-forward policy stays at chance: docs/learning.md)."""

import json

from conftest import load_config

from distrl import local, metrics
from distrl.program import launcher as program


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
    code, out, _ = warm_python.run(
        "launch/evaluate.py", f"--run_dir={out_dir}", "--episodes=200", "--json"
    )
    assert code == 0, out[-2000:]
    figures = json.loads(next(line for line in reversed(out.splitlines()) if line[:1] == "{"))
    assert figures["evaluation"]["episodes"] == 200
    assert figures["evaluation"]["return_low"] >= 0.9, figures
