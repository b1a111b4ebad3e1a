"""Recurrent runs under local_mp (a process per node, as a user launches them): an actor
process killed and restarted mid-run, and a run resumed from its run dir, whose saved
policy launch/evaluate.py plays through its core. Their own file: the suite's longest
runs, so they go to a test worker of their own beside test_recurrent.py's."""

import json
import os
import time

import jax
import numpy as np
import pytest
from conftest import assert_nothing_left, kill_node_when, launch_train

from distrl import checkpoints, metrics
from distrl import experiment as experiment_lib
from distrl.nodes.learner import Learner
from distrl.records import rundir

KEY = jax.random.PRNGKey(0)
pytestmark = pytest.mark.slow


def _memory_chain_flags(run_dir, algorithm: str = "ppo") -> list:
    """launch/train.py's flags for configs/<algorithm>_memory_chain.py (memory 10), PPO
    with a core of 32: confirmed after some 10-20k env steps, where memory 3 can be after
    one update."""
    core = ["--config.agent.core_size=32"] if algorithm == "ppo" else []
    return [
        f"--config=configs/{algorithm}_memory_chain.py",
        f"--run_dir={run_dir}",
        *core,
        "--config.budget.seconds=240",
    ]


def test_a_restarted_actor_process_rejoins_and_the_run_keeps_learning(tmp_path):
    """local_mp (a process per node, distrl's supervisor): actor/0 SIGKILLed once it has
    acted and the learner has learned, before the policy is confirmed, is restarted (its
    core state starts fresh: test_nodes_step's restarted actor), its chunks feed the
    learner again, and the run still confirms its target."""
    run_dir = tmp_path / "run"
    proc = launch_train(_memory_chain_flags(run_dir))
    actor_log = metrics.csv_path(str(run_dir), "actor_0")
    learner_log = metrics.csv_path(str(run_dir), "learner")
    out, killed_at = kill_node_when(  # once it acted and the learner learned from it
        proc,
        run_dir,
        "actor/0",
        lambda: os.path.exists(actor_log) and os.path.exists(learner_log),
        240,
        240,
    )
    assert proc.returncode == 0, out[-3000:]
    cause = "exited with code -9 (killed by SIGKILL)"
    assert f"distrl: actor/0 {cause}; restarting it" in out, out[-3000:]
    result = json.loads((run_dir / "result.json").read_text())
    assert [(r["node"], r["cause"]) for r in result["restarts"]] == [("actor/0", cause)]
    assert result["stop_reason"] == "target_reached", result
    assert result["evaluation"]["return_low"] >= 0.9
    # The restarted process acted (its log continues) and the learner learned after it.
    actor = metrics.read_csv(actor_log)
    assert (actor["time"] > killed_at + 1.0).any(), actor["time"]
    learner = metrics.read_csv(learner_log)
    after = learner["time"] > killed_at + 1.0
    assert (~after).any() and after.any(), learner["time"]
    assert learner["step"][after].max() > learner["step"][~after].max()
    assert_nothing_left(proc)


@pytest.mark.parametrize("algorithm,learns_on", [("ppo", True), ("r2d2", False)])
def test_a_resumed_recurrent_run_restores_its_core_and_its_policy_evaluates(
    algorithm, learns_on, tmp_path, warm_python
):
    """A run stopped by its env-step budget (PPO on its queue, R2D2 on its replay table
    of sequences), resumed from its run dir (local_mp, as a user resumes): the learner
    starts from the checkpoint (the GRU's params with the rest), the resumed run reaches
    its target, and launch/evaluate.py plays the resumed run's saved policy through its
    core to an interval that overlaps the one the run reported. PPO's first run stops
    after one update and the resumed one learns on; R2D2's learner, many steps per
    update of the actors, has learned it by its last checkpoint (seen: version 171
    after 4,096 env steps), so the resumed run confirms the restored policy at once,
    which a fresh core (at chance: 0) could not. The first run's target is off and the
    resumed run sets it again (a target may change on resume)."""
    run_dir = tmp_path / "run"
    flags = _memory_chain_flags(run_dir, algorithm)
    # the first run has no target, so only its budget stops it: R2D2 can confirm 0.9
    # within 4,096 env steps when its learner gets the cores (seen on CI)
    first = launch_train(
        [*flags, "--config.budget.env_steps=4096", "--config.evaluator.target_return=0"]
    )
    out, _ = first.communicate(timeout=240)
    assert first.returncode == 0, out[-3000:]
    first_result = json.loads((run_dir / "result.json").read_text())
    assert first_result["stop_reason"] == "env_step_budget"
    before = checkpoints.store.read_manifest(checkpoints.learner.directory(str(run_dir)))
    assert before["version"] > 0
    config = rundir.load_config(str(run_dir))
    agent = experiment_lib.Experiment(config).agent
    saved, _ = checkpoints.store.load(
        checkpoints.learner.directory(str(run_dir)), algorithm, agent.init(KEY)
    )
    restored, version, _ = Learner(
        experiment_lib.Experiment(config), None, None, str(run_dir), time.time(), restore=True
    ).initial_state(agent)
    assert version == before["version"]
    cores = [k for k in saved.params if "gru" in k]
    assert cores, sorted(saved.params)  # the core's params are in the checkpoint
    for a, b in zip(jax.tree.leaves(saved.params), jax.tree.leaves(restored.params), strict=True):
        np.testing.assert_array_equal(a, np.asarray(b))
    fresh = agent.init(KEY).params
    assert not np.array_equal(
        jax.tree.leaves(fresh[cores[0]])[0], jax.tree.leaves(saved.params[cores[0]])[0]
    )
    resumed = launch_train(
        [
            f"--resume={run_dir}",
            "--config.budget.env_steps=400000",
            "--config.evaluator.target_return=0.9",
        ]
    )
    out, _ = resumed.communicate(timeout=240)
    assert resumed.returncode == 0, out[-3000:]
    assert (
        f"resuming from learner checkpoint {before['state_file']} (version {before['version']})"
        in out
    ), out[-3000:]
    result = json.loads((run_dir / "result.json").read_text())
    assert result["stop_reason"] == "target_reached", result
    for count, was in (
        (result["param_version"], before["version"]),
        # the first run's final count (its checkpoint's counts are the counter's last
        # answer to the learner: none yet under load, after PPO's one update)
        (result["counts"]["env_steps"], first_result["counts"]["env_steps"]),
    ):
        assert count > was if learns_on else count >= was, (count, was)
    evaluator = metrics.read_csv(metrics.csv_path(str(run_dir), "evaluator"))
    assert evaluator["return_low"][0] < 0.9  # the first run's policy had not learned it
    assert (evaluator["param_version"] >= evaluator["param_version"][0]).all()
    code, out, _ = warm_python.run(
        "launch/evaluate.py", f"--run_dir={run_dir}", "--episodes=1000", "--json"
    )
    assert code == 0, out[-2000:]
    figures = json.loads(next(line for line in reversed(out.splitlines()) if line[:1] == "{"))
    played, reported = figures["evaluation"], result["evaluation"]
    assert figures["param_version"] == result["param_version"]
    assert played["return_low"] <= reported["return_high"], (played, reported)
    assert reported["return_low"] <= played["return_high"], (played, reported)
    assert played["return_low"] >= 0.9  # at chance (0) without the core's memory
