"""Experiments a researcher can live with: the run directory, metrics, checkpoints,
resume, plots and the comparison report.

One short DQN run under test_mt (module fixture) is inspected by several tests and
copied for the resume tests; checkpoint refusal is tested on checkpoints written
directly (no program needed); the comparison runs end to end with test_mt runs.
The one test with real local_mp processes that are SIGKILLed and resumed is
marked slow.
"""

import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import jax
import numpy as np
import psutil
import pytest
from conftest import ROOT, drawing_plots, load_config

from distrl import (
    checkpoints,
    cli,
    metrics,
    policy,
)
from distrl import config as config_lib
from distrl import experiment as experiment_lib
from distrl.acting import exact_check, reporting
from distrl.analysis import compare, compare_report
from distrl.nodes import counter
from distrl.program import launcher as program
from distrl.program import progress
from distrl.records import results, rundir

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
NODES = ("actor_0", "actor_1", "learner", "evaluator", "replay")
COLUMNS = {
    "actor_0": {
        "env_steps",
        "episodes",
        "env_steps_per_s",
        "param_version",
        "version_lag",
        "blocked_frac",
    },
    "learner": {"updates", "updates_per_s", "samples_per_s", "loss", "param_version"},
    "evaluator": {
        "elapsed",
        "env_steps",
        "env_steps_per_s",
        "updates_per_s",
        "success_rate",
        "mean_return",
        "mean_length",
    },
    "replay": {
        "size",
        "inserts_per_s",
        "samples_per_s",
        "samples_per_insert",
        "inserts_blocked_frac",
        "samples_blocked_frac",
    },
}


def _python(warm_python, script, *args, timeout=300):
    """Runs a launch/ script as a user would (forked from a warm interpreter: conftest);
    returns (exit status, combined output)."""
    code, out, _ = warm_python.run(f"launch/{script}", *args, timeout=timeout)
    return code, out


def _assert_png(path):
    import matplotlib.image

    data = pathlib.Path(path).read_bytes()
    assert data[:8] == PNG_SIGNATURE, path
    image = matplotlib.image.imread(path)
    assert image.ndim == 3 and min(image.shape[:2]) > 100, image.shape


def _dqn_state(**agent_overrides):
    config = load_config("dqn")
    config.agent.update(agent_overrides)
    agent = experiment_lib.Experiment(config).agent
    return config, agent.init(jax.random.PRNGKey(3))


@pytest.fixture(scope="module")
def short_run(tmp_path_factory):
    """A short DQN run (test_mt): 40 learner steps, logs every 0.5 s, checkpoints every 1 s.

    tempfile's directory points at an empty folder meanwhile: Reverb's default
    checkpointer would make its directory there.
    """
    run_dir = tmp_path_factory.mktemp("short") / "run"
    config = load_config("dqn")
    config.run_dir = str(run_dir)
    config.evaluator.target_success = 0.0
    config.budget.update(dict(env_steps=0, seconds=0.0, learner_steps=40))
    config.log.every_seconds = 0.5
    config.checkpoint.every_seconds = 1.0
    scratch, saved = tmp_path_factory.mktemp("scratch"), tempfile.tempdir
    tempfile.tempdir = str(scratch)
    try:
        with drawing_plots():  # test_plots_are_pngs_and_redrawn_by_the_plot_command's
            result, out_dir = program.run(config, "test_mt")
    finally:
        tempfile.tempdir = saved
    return result, pathlib.Path(out_dir), scratch


def test_run_directory_holds_config_result_logs_and_checkpoints(short_run):
    result, run_dir, scratch = short_run
    # The only stop its config allows: the learner-step budget (no target, no other budget).
    assert result["stop_reason"] == "learner_step_budget"
    assert result["counts"]["learner_steps"] >= 40
    saved = json.loads((run_dir / "config.json").read_text())
    assert saved["run_dir"] == str(run_dir) and saved["algorithm"] == "dqn"
    on_disk = json.loads((run_dir / "result.json").read_text())
    values, actions = np.array(on_disk["values"]), np.array(on_disk["actions"])
    assert values.shape == actions.shape == (4, 4) and set(actions.ravel()) <= {0, 1, 2, 3}
    assert on_disk["map"] == ["SFFF", "FHFH", "FFFH", "HFFG"]
    assert on_disk["replay"]["samples_per_insert"] > 0
    manifest = json.loads((run_dir / "checkpoints/learner/manifest.json").read_text())
    assert manifest["version"] >= 40 and manifest["algorithm"] == "dqn"
    assert (run_dir / "checkpoints/learner" / manifest["state_file"]).exists()
    assert list((run_dir / "checkpoints/replay").glob("*/DONE")), "no complete Reverb checkpoint"
    assert os.listdir(scratch) == [], "something was written outside the run directory"


@pytest.mark.parametrize("node", NODES)
def test_each_node_logs_csv_rows_and_tensorboard_scalars(short_run, node):
    import tensorflow as tf

    _, run_dir, _ = short_run
    data = metrics.read_csv(metrics.csv_path(str(run_dir), node))
    assert data and len(data["step"]) >= 1, f"{node} logged no rows"
    assert COLUMNS.get(node, COLUMNS["actor_0"]) <= set(data), sorted(data)
    assert all(np.isfinite(v).all() for v in data.values())
    events = list((run_dir / "tb" / node).glob("events.out.tfevents.*"))
    assert events, f"{node} wrote no TensorBoard events"
    scalars = {}
    for path in events:
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            for value in event.summary.value:
                scalars[value.tag] = (event.step, float(tf.make_ndarray(value.tensor)))
    assert set(data) - {"step", "time"} == set(scalars)
    last = {k: v[-1] for k, v in data.items()}
    tag = min(scalars)
    assert scalars[tag] == (int(last["step"]), pytest.approx(last[tag], rel=1e-6))


def test_plots_are_pngs_and_redrawn_by_the_plot_command(short_run, tmp_path, warm_python):
    _, run_dir, _ = short_run
    for name in ("curves.png", "policy.png"):
        _assert_png(run_dir / "plots" / name)
    copy = tmp_path / "copy"
    shutil.copytree(run_dir, copy)
    shutil.rmtree(copy / "plots")
    code, out = _python(warm_python, "plot.py", str(copy))
    assert code == 0, out[-2000:]
    for name in ("curves.png", "policy.png"):
        _assert_png(copy / "plots" / name)
    code, out = _python(warm_python, "plot.py", str(tmp_path / "nothing"))
    assert code == 2 and "nothing to plot" in out


def test_resume_continues_counters_and_keeps_learning(short_run, tmp_path):
    _, run_dir, _ = short_run
    copy = tmp_path / "resumed"
    shutil.copytree(run_dir, copy)
    before = checkpoints.store.read_manifest(checkpoints.learner.directory(str(copy)))
    rows_before = len(metrics.read_csv(metrics.csv_path(str(copy), "evaluator"))["step"])
    config = rundir.load_config(str(copy))
    config.run_dir = str(copy)
    # Budgets may change on resume: 60 more updates than the checkpoint's.
    config.budget.update(dict(learner_steps=before["version"] + 60, seconds=200.0))
    result, _ = program.run(config, "test_mt", resume=True)
    assert result["stop_reason"] == "learner_step_budget", result
    assert result["counts"]["learner_steps"] >= before["version"] + 60
    assert result["counts"]["env_steps"] > before["counts"]["env_steps"]
    evaluator = metrics.read_csv(metrics.csv_path(str(copy), "evaluator"))
    resumed = {k: v[rows_before:] for k, v in evaluator.items()}
    assert len(resumed["step"]) >= 1
    # The resumed launch never counted from zero: steps and versions continue.
    assert resumed["env_steps"].min() >= before["counts"]["env_steps"], resumed["env_steps"]
    assert resumed["param_version"].min() >= before["version"], resumed["param_version"]
    learner = metrics.read_csv(metrics.csv_path(str(copy), "learner"))
    assert learner["step"][-1] > before["version"] and np.isfinite(learner["loss"]).all()
    after = checkpoints.store.read_manifest(checkpoints.learner.directory(str(copy)))
    assert after["version"] >= before["version"] + 60


def test_a_resumed_learner_starts_from_the_checkpointed_state(short_run):
    from distrl.nodes.learner import Learner

    _, run_dir, _ = short_run
    config = rundir.load_config(str(run_dir))
    agent = experiment_lib.Experiment(config).agent
    expected, manifest = checkpoints.store.load(
        checkpoints.learner.directory(str(run_dir)), "dqn", agent.init(jax.random.PRNGKey(0))
    )
    learner = Learner(
        experiment_lib.Experiment(config), None, None, str(run_dir), time.time(), restore=True
    )
    state, version, counts = learner.initial_state(agent)
    # A clean stop's counter record holds nothing newer than its final checkpoint's
    # version: the same version, counts continued from that record.
    assert version == manifest["version"]
    assert counts == counter.resumed_counts(manifest["counts"], counter.state_file(str(run_dir)))
    assert counts["env_steps"] >= manifest["counts"]["env_steps"]
    for a, b in zip(jax.tree.leaves(expected), jax.tree.leaves(state), strict=True):
        np.testing.assert_array_equal(a, np.asarray(b))
    fresh, _, _ = Learner(
        experiment_lib.Experiment(config), None, None, str(run_dir), 0.0
    ).initial_state(agent)
    assert not np.array_equal(
        np.asarray(fresh.params["q_head"]["w"]), expected.params["q_head"]["w"]
    )


def test_resume_after_a_kill_long_after_the_checkpoint_never_counts_back(
    short_run, tmp_path, capfd
):
    """A kill after the last checkpoint leaves the counter's record ahead of it (the
    record is written at every change): the resume continues from that record, and
    the learner publishes versions above every one served, though its params are
    the checkpoint's, and the run clock goes on from the record's last change."""
    _, run_dir, _ = short_run
    copy = tmp_path / "killed"
    shutil.copytree(run_dir, copy)
    before = checkpoints.store.read_manifest(checkpoints.learner.directory(str(copy)))
    record = pathlib.Path(counter.state_file(str(copy)))
    ahead = json.loads(record.read_text())  # what the counter had heard by the kill
    for name, more in dict(env_steps=50_000, episodes=7_000, items_written=12_000).items():
        ahead[name] = before["counts"][name] + more
    ahead.update(param_version=before["version"] + 500, learner_steps=before["version"] + 500)
    record.write_text(json.dumps(ahead))
    # ... and the run went on 100 s after its last evaluation: the record's last change.
    last = metrics.last_row(metrics.csv_path(str(copy), "evaluator"))
    run_start = last["time"] - last["elapsed"]
    stopped_at = max(before["elapsed_seconds"], last["elapsed"]) + 100.0
    os.utime(record, (run_start + stopped_at,) * 2)
    rows_before = len(metrics.read_csv(metrics.csv_path(str(copy), "evaluator"))["step"])
    config = rundir.load_config(str(copy))
    config.run_dir = str(copy)
    config.budget.update(dict(learner_steps=ahead["learner_steps"] + 30, seconds=stopped_at + 200))
    result, _ = program.run(config, "test_mt", resume=True)
    said = capfd.readouterr().err
    assert f"counts continue from {record}, ahead of the checkpoint's: " in said, said
    assert f"param_version {before['version']} -> {ahead['param_version']}" in said, said
    assert f"run clock {before['elapsed_seconds']:.0f} -> {stopped_at:.0f} s" in said, said
    assert result["stop_reason"] == "learner_step_budget", result
    assert result["counts"]["learner_steps"] > ahead["learner_steps"], result["counts"]
    # >=: presumably the restored replay can feed the 30 updates before an actor's
    # first count reaches the counter (seen once in CI at 00dd570: env_steps 78,672 both)
    for name in ("env_steps", "episodes", "items_written"):
        assert result["counts"][name] >= ahead[name], (name, result["counts"])
    # the result is about the resumed learner's params or (keep_best) about a kept policy,
    # under its own version: an earlier launch's, or this launch's (above the record's;
    # seen at 6143422: 813 > 775), never one between the checkpoint's and the record's
    version = result["param_version"]
    if not result["kept_best"]:
        assert version > ahead["param_version"], result
    else:
        assert version <= before["version"] or version > ahead["param_version"], result
    evaluator = metrics.read_csv(metrics.csv_path(str(copy), "evaluator"))
    resumed = {k: v[rows_before:] for k, v in evaluator.items()}
    assert len(resumed["step"]) >= 1
    assert resumed["env_steps"].min() >= ahead["env_steps"], resumed["env_steps"]
    assert resumed["episodes"].min() >= ahead["episodes"], resumed["episodes"]
    assert resumed["param_version"].min() >= ahead["param_version"], resumed["param_version"]
    assert resumed["elapsed"].min() >= stopped_at, resumed["elapsed"]  # nor does the clock
    # Every version the resumed learner published is above those served before the kill.
    learner = metrics.read_csv(metrics.csv_path(str(copy), "learner"))
    resumed_rows = learner["step"][learner["step"] > before["version"]]
    assert resumed_rows.size and resumed_rows.min() > ahead["param_version"], learner["step"]
    after = checkpoints.store.read_manifest(checkpoints.learner.directory(str(copy)))
    assert after["version"] > ahead["param_version"]
    assert after["counts"]["env_steps"] >= ahead["env_steps"]  # >=: as above


def test_a_resumed_evaluator_keeps_the_policy_an_earlier_launch_kept(short_run, tmp_path):
    """The kept best survives a new launch of the evaluator (a resume, a restart): its
    evaluations are compared with the policy on disk, which a worse one never replaces.
    The earlier launch's policy here carries an evaluation no params can beat (a mean
    return lower bound of 2 on a map whose returns are at most 1)."""
    _, run_dir, _ = short_run
    copy = tmp_path / "kept"
    shutil.copytree(run_dir, copy)
    config = rundir.load_config(str(copy))
    saved = policy.load_policy(str(copy))
    unbeatable = dict(success_rate=1.0, mean_return=2.0, mean_length=6.0, success_low=1.0)
    unbeatable.update(success_high=1.0, return_low=2.0, return_high=2.0)
    unbeatable.update(episodes=float(config.evaluator.confirm_envs))
    checkpoints.policy.Keeper(str(copy), "dqn").offer(saved.params, 7, unbeatable, final=True)
    config.run_dir = str(copy)
    before = checkpoints.store.read_manifest(checkpoints.learner.directory(str(copy)))
    config.budget.update(dict(learner_steps=before["version"] + 30, seconds=200.0))
    result, _ = program.run(config, "test_mt", resume=True)
    assert result["stop_reason"] == "learner_step_budget", result
    assert result["counts"]["learner_steps"] >= before["version"] + 30
    assert result["param_version"] == 7 and result["kept_best"], result
    assert result["evaluation"]["mean_return"] == 2.0, result["evaluation"]
    assert policy.load_policy(str(copy)).version == 7


def test_resume_refuses_a_changed_config_but_allows_budget_changes(short_run, tmp_path):
    _, run_dir, _ = short_run
    config = rundir.load_config(str(run_dir))
    config.budget.env_steps = 123  # a budget may change
    rundir.check_resume(config, str(run_dir))
    config.agent.learning_rate = 0.1
    config.num_actors = 3
    with pytest.raises(config_lib.ConfigError) as info:
        program.run(config, "test_mt", resume=True)
    message = str(info.value)
    assert "changes 2 field(s): config.agent.learning_rate: 0.003 -> 0.1; " in message
    assert "config.num_actors: 2 -> 3. Drop" in message
    fresh = load_config("dqn")
    fresh.run_dir = str(run_dir)
    with pytest.raises(config_lib.ConfigError, match="already holds a run"):
        program.run(fresh, "test_mt")


def test_resume_command_reloads_the_saved_config_and_names_conflicts(
    short_run, tmp_path, warm_python
):
    _, run_dir, _ = short_run
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    code, out = _python(
        warm_python,
        "train.py",
        f"--resume={copy}",
        "--config.agent.learning_rate=0.1",
        "--config.budget.env_steps=999",
        timeout=120,
    )
    assert code == 2, out[-2000:]
    assert "changes 1 field(s): config.agent.learning_rate: 0.003 -> 0.1." in out
    assert "budget" not in out.split("changes 1 field(s):")[1].split("Drop")[0]
    assert "Traceback" not in out and not (copy / "logs" / "nodes-2").exists()
    code, out = _python(warm_python, "train.py", f"--resume={tmp_path / 'missing'}", timeout=120)
    assert code == 2 and "does not exist (not a run directory?)" in out, out[-2000:]


def test_checkpoint_round_trip_is_exact_and_atomic(tmp_path):
    _, state = _dqn_state()
    state = state._replace(step=np.int32(17))
    ckpt_dir = str(tmp_path / "ckpt")
    checkpoints.store.save(ckpt_dir, state, 17, dict(algorithm="dqn", counts={"env_steps": 5.0}))
    # A write killed before its manifest: a temp file, and the old checkpoint in force.
    pathlib.Path(ckpt_dir, "state-0000000099.npz.tmp").write_bytes(b"half a file")
    loaded, manifest = checkpoints.store.load(ckpt_dir, "dqn", state)
    assert manifest["version"] == 17 and manifest["counts"] == {"env_steps": 5.0}
    for a, b in zip(jax.tree.leaves(state), jax.tree.leaves(loaded), strict=True):
        np.testing.assert_array_equal(np.asarray(a), b)
    assert jax.tree.structure(loaded) == jax.tree.structure(state)
    for version in (18, 18, 19, 20):  # 18 twice: the same version again
        checkpoints.store.save(ckpt_dir, state, version, dict(algorithm="dqn"), keep=3)
    files = sorted(os.listdir(ckpt_dir))  # the newest 3 pairs, the killed write's temp gone
    assert "manifest.json" in files and len(files) == 7, files
    newest = checkpoints.store.read_manifest(ckpt_dir)
    assert newest["version"] == 20 and newest["state_file"] in files
    assert [f for f in files if f.endswith(".npz")][0].startswith("state-0000000018-")
    assert checkpoints.store.load(ckpt_dir, "dqn", state)[1]["version"] == 20


def test_a_corrupt_newest_learner_checkpoint_falls_back_to_the_previous(tmp_path):
    _, state = _dqn_state()
    ckpt_dir = tmp_path / "ckpt"
    for version in (5, 6, 7):
        checkpoints.store.save(str(ckpt_dir), state, version, dict(algorithm="dqn"), keep=3)
    newest = checkpoints.store.read_manifest(str(ckpt_dir))
    npz = ckpt_dir / newest["state_file"]
    npz.write_bytes(npz.read_bytes()[:-100])  # truncated after the fact
    loaded, manifest = checkpoints.store.load(str(ckpt_dir), "dqn", state)
    assert manifest["version"] == 6, manifest
    assert len(manifest["skipped"]) == 1 and "corrupt" in manifest["skipped"][0]
    # Checkpoints written after the fall back are newer than the corrupt one.
    checkpoints.store.save(str(ckpt_dir), loaded, 6, dict(algorithm="dqn"), keep=3)
    assert checkpoints.store.load(str(ckpt_dir), "dqn", state)[1]["skipped"] == []


def test_incomplete_and_corrupt_checkpoints_are_refused(tmp_path):
    _, state = _dqn_state()
    ckpt_dir = tmp_path / "ckpt"
    ckpt_dir.mkdir()
    (ckpt_dir / "state-0000000005.npz.tmp").write_bytes(b"killed mid-write")
    with pytest.raises(checkpoints.store.CheckpointError, match="no complete .* unfinished write"):
        checkpoints.store.load(str(ckpt_dir), "dqn", state)
    checkpoints.store.save(str(ckpt_dir), state, 5, dict(algorithm="dqn"))
    npz = ckpt_dir / checkpoints.store.read_manifest(str(ckpt_dir))["state_file"]
    data = bytearray(npz.read_bytes())
    data[len(data) // 2] ^= 0xFF
    npz.write_bytes(bytes(data))
    with pytest.raises(
        checkpoints.store.CheckpointError, match="corrupt: its SHA-256 does not match"
    ):
        checkpoints.store.load(str(ckpt_dir), "dqn", state)
    (ckpt_dir / npz.name.replace(".npz", ".json")).write_text('{"format": "distrl-learn')
    with pytest.raises(checkpoints.store.CheckpointError, match="unreadable"):
        checkpoints.store.read_manifest(str(ckpt_dir))


def test_checkpoints_of_another_algorithm_or_shape_are_refused(tmp_path):
    _, dqn_state = _dqn_state()
    ckpt_dir = checkpoints.learner.directory(str(tmp_path))
    checkpoints.store.save(ckpt_dir, dqn_state, 1, dict(algorithm="dqn"))
    with pytest.raises(
        checkpoints.store.CheckpointError, match="written by algorithm 'dqn'.* runs 'ppo'"
    ):
        ppo = load_config("ppo")
        checkpoints.learner.verify(
            str(tmp_path), ppo.algorithm, experiment_lib.Experiment(ppo).agent
        )
    _, small_state = _dqn_state(hidden_sizes=(32,))
    with pytest.raises(checkpoints.store.CheckpointError, match="does not fit") as info:
        checkpoints.store.load(ckpt_dir, "dqn", small_state)
    assert "checkpoint (16, 64) float32, config (16, 32) float32" in str(info.value)


def test_the_policy_keeper_writes_each_version_once_and_keeps_only_the_newest(tmp_path):
    _, state = _dqn_state()
    keeper, ckpt_dir = (
        checkpoints.policy.Keeper(str(tmp_path), "dqn"),
        checkpoints.policy.directory(str(tmp_path)),
    )
    keeper.offer(state.params, 5, dict(success_rate=np.float32(0.25)))
    first, names = keeper.on_disk(), sorted(os.listdir(ckpt_dir))
    assert first["version"] == 5 and first["file"].startswith(
        "checkpoints/policy/params-0000000005-"
    )
    keeper.offer(state.params, 5)  # the same report: nothing is written
    assert sorted(os.listdir(ckpt_dir)) == names
    changed = jax.tree.map(lambda x: x + 1.0, state.params)
    keeper.offer(changed, 9)
    assert keeper.on_disk()["version"] == 9
    assert [f for f in os.listdir(ckpt_dir) if f.endswith(".npz")] == [
        os.path.basename(keeper.on_disk()["file"])
    ]
    # The final report's params are written once more, durably (fsynced), then not again.
    written = keeper.on_disk()
    keeper.offer(changed, 9, final=True)
    durable = keeper.on_disk()
    assert durable != written and durable["version"] == 9
    keeper.offer(changed, 9, final=True)
    assert keeper.on_disk() == durable and len(os.listdir(ckpt_dir)) == 3  # npz, json, copy
    manifest, leaves = checkpoints.store.read_newest(ckpt_dir, checkpoints.policy.POLICY)
    assert manifest["format"] == "distrl-policy/1" and manifest["algorithm"] == "dqn"
    for a, b in zip(jax.tree.leaves(changed), leaves, strict=True):
        np.testing.assert_array_equal(np.asarray(a), b)
    # One kind is never read as the other.
    with pytest.raises(
        checkpoints.store.CheckpointError, match="is not a distrl learner checkpoint"
    ):
        checkpoints.store.read_manifest(ckpt_dir)


def test_result_and_summary_name_the_reported_policy_and_the_learners_last(short_run):
    result, run_dir, _ = short_run
    saved, last = (
        result["policy"],
        checkpoints.store.read_manifest(checkpoints.learner.directory(str(run_dir))),
    )
    assert saved["version"] == result["param_version"]
    assert [p.name for p in (run_dir / "checkpoints/policy").glob("*.npz")] == [
        os.path.basename(saved["file"])
    ]
    manifest = json.loads((run_dir / "checkpoints/policy/manifest.json").read_text())
    assert manifest["version"] == saved["version"] and manifest["format"] == "distrl-policy/1"
    learner_file = f"checkpoints/learner/{last['state_file']}"
    assert result["learner_checkpoint"] == dict(file=learner_file, version=last["version"])
    text = results.summary(result, str(run_dir))
    assert f"reported policy (version {saved['version']:,}): {saved['file']}" in text
    assert f"launch/evaluate.py --run_dir={run_dir}" in text
    assert f"learner's last checkpoint (version {last['version']:,}" in text
    assert learner_file in text
    assert result["evaluated"] == "greedy" and "(greedy evaluation)" in text
    sampled = results.summary(dict(result, evaluated="sampled"), str(run_dir))
    assert "(sampled evaluation)" in sampled  # evaluator.sampled's run says which it played


def _json_line(text: str) -> dict:
    """The JSON object a --json command printed (other lines: library logs)."""
    return json.loads(next(line for line in reversed(text.splitlines()) if line.startswith("{")))


def test_evaluate_command_scores_the_reported_policy_or_the_learners_last(short_run, warm_python):
    result, run_dir, _ = short_run
    code, out = _python(warm_python, "evaluate.py", f"--run_dir={run_dir}", "--json")
    assert code == 0, out[-2000:]
    figures = _json_line(out)
    assert figures["param_version"] == result["param_version"] == figures["reported_version"]
    assert figures["exact"]["success"] == result["exact"]["success"]  # to the float
    assert figures["exact"] == result["exact"]
    assert figures["actions"] == result["actions"] and figures["values"] == result["values"]
    ev = figures["evaluation"]  # the 4x4 map is deterministic: one episode, exact
    assert ev["episodes"] == 1 and ev["success_rate"] == result["evaluation"]["success_rate"]
    code, out = _python(warm_python, "evaluate.py", f"--run_dir={run_dir}", "--episodes=50")
    assert code == 0, out[-2000:]
    assert f"reported policy, version {result['param_version']:,}" in out
    assert reporting.describe_exact(result["exact"]) in out
    arrows = reporting.render_arrows(np.array(result["actions"]), result["map"])
    assert arrows in out, out[-2000:]
    code, out = _python(
        warm_python, "evaluate.py", f"--run_dir={run_dir}", "--checkpoint=latest", "--json"
    )
    assert code == 0, out[-2000:]
    latest = _json_line(out)
    assert latest["param_version"] == result["learner_checkpoint"]["version"]
    assert latest["file"] == result["learner_checkpoint"]["file"]
    version = latest["param_version"]  # a kept checkpoint by its version; one not kept
    code, out = _python(
        warm_python, "evaluate.py", f"--run_dir={run_dir}", f"--checkpoint={version}", "--json"
    )
    assert code == 0, out[-2000:]
    assert _json_line(out)["file"] == latest["file"]
    code, out = _python(warm_python, "evaluate.py", f"--run_dir={run_dir}", "--checkpoint=99999")
    assert code == 2 and "version 99,999" in out and "kept: " in out, out[-2000:]
    assert f"{version:,}" in out.split("kept: ")[1], out[-2000:]


def test_evaluate_command_plays_the_policy_as_its_run_evaluated_it(
    short_run, tmp_path, warm_python
):
    """A run with `evaluator.sampled` reported its sampled policy's return: evaluate.py
    plays that policy too (every episode, the map's determinism aside), and says so."""
    _, run_dir, _ = short_run
    copy = tmp_path / "sampled"
    copy.mkdir()
    config = json.loads((run_dir / "config.json").read_text())
    config["evaluator"]["sampled"] = True
    (copy / "config.json").write_text(json.dumps(config))
    shutil.copytree(run_dir / "checkpoints/policy", copy / "checkpoints/policy")
    code, out = _python(warm_python, "evaluate.py", f"--run_dir={copy}", "--episodes=64", "--json")
    assert code == 0, out[-2000:]
    ev = _json_line(out)["evaluation"]
    assert ev["policy"] == "sampled" and ev["episodes"] == 64
    code, out = _python(warm_python, "evaluate.py", f"--run_dir={run_dir}", "--episodes=64")
    assert code == 0 and out.rstrip().count("(greedy)") == 1, out[-2000:]
    for run, play in ((copy, "greedy"), (run_dir, "sampled")):  # --play overrides the run's way
        code, out = _python(
            warm_python,
            "evaluate.py",
            f"--run_dir={run}",
            "--episodes=64",
            f"--play={play}",
            "--json",
        )
        assert code == 0, out[-2000:]
        assert _json_line(out)["evaluation"]["policy"] == play
    code, out = _python(warm_python, "evaluate.py", f"--run_dir={run_dir}", "--play=argmax")
    assert code == 2 and "--play" in out and "greedy" in out, out[-2000:]


def test_evaluate_command_refuses_a_corrupt_or_missing_policy_in_one_line(
    short_run, tmp_path, warm_python
):
    _, run_dir, _ = short_run
    copy = tmp_path / "copy"
    copy.mkdir()
    shutil.copy(run_dir / "config.json", copy)
    shutil.copytree(run_dir / "checkpoints/policy", copy / "checkpoints/policy")
    npz = next((copy / "checkpoints/policy").glob("*.npz"))
    os.truncate(npz, npz.stat().st_size // 2)
    for args, message in [
        ([f"--run_dir={copy}"], f"distrl: cannot evaluate: checkpoint {npz} is corrupt"),
        ([f"--run_dir={tmp_path / 'none'}"], f"run directory {tmp_path / 'none'} does not exist"),
        ([f"--run_dir={tmp_path}"], f"{tmp_path} is not a run directory (no config.json)"),
        (["--run_dir=" + str(copy), "--episodes=0"], "bad flag: flag --episodes=0"),
    ]:
        code, out = _python(warm_python, "evaluate.py", *args)
        assert code == 2 and message in out and "Traceback" not in out, out[-2000:]
        assert len(out.strip().splitlines()) == 1, out
    shutil.rmtree(copy / "checkpoints/policy")
    code, out = _python(warm_python, "evaluate.py", f"--run_dir={copy}")
    assert code == 2 and "holds no saved policy" in out and "--checkpoint=latest" in out, out


@pytest.mark.parametrize("preset", ["sac_pendulum", "sac_gymnasium_pendulum"])
def test_evaluate_command_names_a_diverged_policy_in_one_line(preset, tmp_path, warm_python):
    """A saved policy whose params are NaN (a diverged run's, written by the evaluator's
    `Keeper`) acts NaN: launch/evaluate.py names the policy, the env, the copy and the
    step in one line and exits 1, before the env steps with it: a JAX env's episodes
    (gymnax) are checked after their jitted call, an env stepped in Python's before
    each step (the host evaluator), not a NaN return with exit 0."""
    config = load_config(preset)
    run_dir = str(tmp_path / "run")
    rundir.write_config(config, run_dir)
    agent = experiment_lib.Experiment(config).agent
    params = agent.init(jax.random.PRNGKey(0)).params
    diverged = jax.tree.map(lambda x: x * np.nan, params)
    checkpoints.policy.Keeper(run_dir, config.algorithm).offer(diverged, 7, final=True)
    code, out = _python(warm_python, "evaluate.py", f"--run_dir={run_dir}", "--episodes=20")
    file = os.path.relpath(policy.load_policy(run_dir).file, run_dir)
    assert code == 1 and "Traceback" not in out, out[-2000:]
    assert out.strip().splitlines() == [
        f"distrl: reported policy, version 7 ({file}): env {config.env.name} (evaluation, "
        f"copy 0) at step 1: the policy's action is not finite (its params diverged)"
    ], out


def test_load_policy_acts_as_the_reported_policy(short_run):
    result, run_dir, _ = short_run
    loaded = policy.load_policy(str(run_dir))
    assert loaded.version == result["param_version"] and loaded.which == policy.REPORTED
    cells = np.eye(loaded.env.num_cells, dtype=np.float32)  # every cell's observation
    assert np.asarray(loaded.act(cells)).tolist() == np.ravel(result["actions"]).tolist()
    latest = policy.load_policy(str(run_dir), policy.LATEST)
    assert latest.version == result["learner_checkpoint"]["version"]
    assert np.asarray(latest.act(cells)).shape == (loaded.env.num_cells,)


def test_resume_from_a_bad_checkpoint_exits_2_before_any_process(short_run, tmp_path, warm_python):
    _, run_dir, _ = short_run
    corrupt, other = tmp_path / "corrupt", tmp_path / "other_shape"
    shutil.copytree(run_dir, corrupt)
    for npz in pathlib.Path(checkpoints.learner.directory(str(corrupt))).glob("*.npz"):
        npz.write_bytes(npz.read_bytes()[:-100])  # every one truncated after the fact
    code, out = _python(warm_python, "train.py", f"--resume={corrupt}", timeout=120)
    assert code == 2, out[-2000:]
    assert "cannot resume" in out and "corrupt" in out and "Traceback" not in out
    assert not (corrupt / "logs" / "nodes-2").exists()  # no node was started
    # A config.json edited to another network shape: the config check passes, the
    # checkpoint does not fit.
    shutil.copytree(run_dir, other)
    saved = json.loads((other / "config.json").read_text())
    saved["agent"]["hidden_sizes"] = [32]
    (other / "config.json").write_text(json.dumps(saved))
    config = rundir.load_config(str(other))
    config.run_dir = str(other)
    with pytest.raises(checkpoints.store.CheckpointError, match="does not fit this config's dqn"):
        program.run(config, "test_mt", resume=True)


def _manifests(ckpt_dir):
    """Every learner manifest of a checkpoint directory, oldest first."""
    paths = sorted(pathlib.Path(ckpt_dir).glob("state-*.json"), key=checkpoints.store.written_ms)
    return [json.loads(path.read_text()) for path in paths]


def _replay_checkpoints(run_dir):
    """The run's kept replay checkpoints, oldest first; not one a kill cut mid-copy
    (`<name>.tmp`, which a resume never reads: seen at b5ad033 as the newest)."""
    kept = pathlib.Path(checkpoints.replay.kept_dir(str(run_dir)))
    return sorted(p for p in kept.iterdir() if p.suffix != ".tmp") if kept.is_dir() else []


def test_resume_falls_back_to_the_previous_learner_and_replay_checkpoints(
    short_run, tmp_path, capfd
):
    _, run_dir, _ = short_run
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    ckpt_dir = checkpoints.learner.directory(str(copy))
    newest = checkpoints.store.read_manifest(ckpt_dir)
    (pathlib.Path(ckpt_dir) / newest["state_file"]).write_bytes(b"garbage")
    older = _manifests(ckpt_dir)[-2]  # resumed with the replay checkpoint of its own round
    kept = _replay_checkpoints(copy)
    assert len(kept) >= 2, kept  # checkpoints every second, 3 kept
    (kept[-1] / "items.tfrecord").write_bytes(b"garbage")  # the newest replay checkpoint
    config = rundir.load_config(str(copy))
    config.run_dir = str(copy)
    config.budget.update(dict(learner_steps=newest["version"] + 20, seconds=200.0))
    result, _ = program.run(config, "test_mt", resume=True)
    err = capfd.readouterr().err
    assert f"learner checkpoint skipped: checkpoint {ckpt_dir}" in err and "corrupt" in err
    assert f"replay checkpoint skipped: {kept[-1]}: items.tfrecord is 7 bytes, " in err, err
    assert (
        f"resuming from learner checkpoint {older['state_file']} (version {older['version']}) "
        f"and replay checkpoint {kept[-2].name}: written in the same round"
    ) in err, err
    assert result["stop_reason"] == "learner_step_budget"
    assert result["counts"]["env_steps"] >= newest["counts"]["env_steps"] * 0.5


def test_replay_checkpoints_that_cannot_load_are_refused_before_start(
    short_run, tmp_path, warm_python
):
    _, run_dir, _ = short_run
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    kept = _replay_checkpoints(copy)
    (kept[-1] / "DONE").unlink()  # an unfinished write is never used
    assert "no DONE marker" in checkpoints.replay.problem(str(kept[-1]))
    for path in kept[:-1]:
        (path / "chunks.tfrecord").write_bytes((path / "chunks.tfrecord").read_bytes()[:40])
    code, out = _python(warm_python, "train.py", f"--resume={copy}", timeout=120)
    assert code == 2, out[-2000:]
    assert f"no replay checkpoint of {copy} can be loaded with learner checkpoint " in out, out
    assert f"; the newest, {kept[-1]}: no DONE marker" in out, out
    assert "Traceback" not in out and not (copy / "logs" / "nodes-2").exists()


def test_one_run_directory_one_live_launch(short_run, tmp_path, warm_python):
    _, run_dir, _ = short_run
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\nfrom distrl.records import rundir\n"
            "with rundir.locked(sys.argv[1]):\n    print('held', flush=True)\n    time.sleep(300)",
            str(copy),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        code, out = _python(warm_python, "train.py", f"--resume={copy}", timeout=120)
        assert code == 2, out[-2000:]
        assert f"run directory {copy} is in use by a live launch (launcher pid {holder.pid})" in out
        assert "Traceback" not in out and not (copy / "logs" / "nodes-2").exists()
    finally:
        holder.kill()
        holder.wait()
    with (
        rundir.locked(str(copy)),  # a killed holder leaves no stale lock
        pytest.raises(rundir.RunDirBusy, match=f"launcher pid {os.getpid()}"),
        rundir.locked(str(copy)),
    ):
        pass


def test_progress_line_redraws_on_a_tty_and_prints_plain_lines_otherwise(tmp_path):
    config = load_config("dqn")
    run_dir = str(tmp_path)

    class Stream(list):
        def __init__(self, tty):
            super().__init__()
            self.tty = tty

        def isatty(self):
            return self.tty

        def write(self, text):
            self.append(text)

        def flush(self):
            pass

    tty, plain = Stream(True), Stream(False)
    with (
        progress.ProgressLine(run_dir, config, tty, period=0.05),
        progress.ProgressLine(run_dir, config, plain, period=0.05, plain_every=60),
    ):
        time.sleep(0.2)
        logger = metrics.MetricsLogger(run_dir, "evaluator")
        logger.write(
            5000,
            dict(
                elapsed=12.0,
                env_steps=5000,
                env_steps_per_s=2500,
                learner_steps=40,
                updates_per_s=20,
                success_rate=0.5,
            ),
        )
        logger.close()
        time.sleep(0.2)
    redraws = [t for t in tty if t.startswith("\r")]
    assert len(redraws) >= 3 and "\n" not in "".join(redraws)
    assert "env steps     5k (2.5k/s)  updates     40 (20/s)  success 0.50" in redraws[-1]
    assert "left: 2M steps, 288 s, or success 1.00" in redraws[-1]
    lines = "".join(plain).splitlines()
    assert "\r" not in "".join(plain) and len(lines) == 3, lines  # header, start, final
    assert "starting 6 nodes" in lines[1] and "success 0.50" in lines[2]


def test_metrics_csv_appends_after_a_cut_row_and_keeps_its_header(tmp_path):
    logger = metrics.MetricsLogger(str(tmp_path), "actor_0")
    logger.write(1, dict(a=1.0, b=2.0))
    logger.close()
    path = metrics.csv_path(str(tmp_path), "actor_0")
    with open(path, "a") as f:
        f.write("2,17000")  # a row cut short by a kill
    resumed = metrics.MetricsLogger(str(tmp_path), "actor_0")
    resumed.write(3, dict(b=4.0, c=9.0))  # a new column is dropped, a missing one blank
    resumed.close()
    data = metrics.read_csv(path)
    assert list(data) == ["step", "time", "a", "b"]
    np.testing.assert_array_equal(data["step"], [1, 3])
    assert data["b"][-1] == 4.0 and np.isnan(data["a"][-1])


def test_compare_validates_every_config_before_running_any(tmp_path, warm_python):
    out = tmp_path / "cmp"
    code, text = _python(
        warm_python,
        "compare.py",
        "--configs=dqn,ppo,sarsa",
        "--seeds=0,1",
        "--config.replay.queue_size=0",
        f"--out={out}",
        timeout=120,
    )
    assert code == 2, text[-2000:]
    (line,) = [ln for ln in text.splitlines() if ln.startswith("distrl: ")]
    assert "ppo seed 0: config.replay.queue_size=0" in line
    assert "sarsa seed 1:" in line and "dqn seed" not in line
    assert not out.exists()


def test_compare_overrides_one_config_with_its_own_flags(tmp_path):
    """`--<name>.` reaches that config's runs alone, over `--config.`'s."""
    overrides = cli.Overrides({"actor.num_envs": 16}, {"ppo": {"actor.num_envs": 32}})
    specs = compare.plan(["dqn", "ppo"], [0], str(tmp_path), {"num_actors": 2}, overrides)
    assert {s.name: s.config.actor.num_envs for s in specs} == {"dqn": 16, "ppo": 32}


def test_compare_runs_end_to_end_and_writes_report_and_plot(tmp_path, warm_python):
    out = tmp_path / "cmp"
    code, text = _python(
        warm_python,
        "compare.py",
        "--configs=dqn,a2c",
        "--seeds=0,1",
        "--env_steps=3000",
        "--launch_type=test_mt",
        "--target=0.5",
        f"--out={out}",
        timeout=400,
    )
    assert code == 0, text[-3000:]
    report = (out / "report.md").read_text()
    assert "| config | pipeline | confirmed target | reached 95% | reached 98% |" in report
    assert "final exact success | of optimal | env steps to 95% | wall s to 95% |" in report
    assert "| dqn | replay table" in report and "| a2c | queue" in report
    assert "![" in report and "(curves.png)" in report
    assert report.count("| dqn | 0 |") + report.count("| dqn | 1 |") == 2
    _assert_png(out / "curves.png")
    runs = metrics.read_csv(str(out / "runs.csv"))
    assert len(runs["seed"]) == 4 and (runs["returncode"] == 0).all()
    assert (runs["env_steps"] >= 3000).all() and (runs["env_steps_per_s"] > 0).all()
    for name in ("dqn", "a2c"):
        for seed in (0, 1):
            saved = json.loads((out / name / f"seed{seed}" / "config.json").read_text())
            assert saved["seed"] == seed and saved["budget"]["env_steps"] == 3000
            assert (out / name / f"seed{seed}" / "result.json").exists()


def test_compare_summary_reads_exact_success_data_age_and_first_reach(short_run):
    _, run_dir, _ = short_run
    on_disk = json.loads((run_dir / "result.json").read_text())
    spec = compare.RunSpec("dqn", 0, str(run_dir), rundir.load_config(str(run_dir)))
    row = compare.summarize(spec, target=1.0, returncode=0)
    exact, data = on_disk["exact"], on_disk["data"]
    assert row["exact_success"] == exact["success"] and row["exact_ratio"] == exact["ratio"]
    assert row["optimal_success"] == exact["optimal_success"] == pytest.approx(1.0)
    assert row["data_age_mean"] == data["data_age_mean"] >= 0
    assert row["data_age_max"] == data["data_age_max"] >= row["data_age_mean"]
    assert row["samples_per_insert"] == on_disk["replay"]["samples_per_insert"] > 0
    assert row["env_steps_per_s"] > 0 and row["updates_per_s"] > 0
    rows = metrics.read_csv(metrics.csv_path(str(run_dir), "evaluator"))
    for fraction in compare.FRACTIONS:  # the first evaluation at that share, or none
        hits = np.flatnonzero(rows["exact_success"] >= fraction * rows["optimal_success"])
        steps = row[f"steps_to_{round(100 * fraction)}"]
        if len(hits):
            assert steps == rows["env_steps"][hits[0]], fraction
        else:
            assert np.isnan(steps), fraction
    text = compare_report.markdown("t", [], [row], {"dqn": "replay table"}, [])
    assert "| config | pipeline | confirmed target | reached 95% | reached 98% |" in text
    assert "final exact success | of optimal | env steps to 95% |" in text
    assert f"| {exact['success']:.3f} | {100 * exact['ratio']:.1f}% |" in text
    assert "data age mean | data age max |" in text


def test_compare_report_only_rewrites_the_report_of_finished_runs(short_run, tmp_path, warm_python):
    _, run_dir, _ = short_run
    out = tmp_path / "cmp"
    shutil.copytree(run_dir, out / "dqn" / "seed0")
    (out / "dqn" / "seed0" / "train.log").write_text("...\ncompare: exit 0\n")
    code, text = _python(
        warm_python,
        "compare.py",
        "--report_only",
        "--configs=dqn,ppo",
        "--seeds=0,1",
        f"--out={out}",
    )
    assert code == 0, text[-3000:]
    assert "report of 1 runs" in text
    runs = metrics.read_csv(str(out / "runs.csv"))
    result = json.loads((run_dir / "result.json").read_text())
    assert list(runs["seed"]) == [0] and list(runs["returncode"]) == [0]
    assert runs["exact_success"][0] == pytest.approx(result["exact"]["success"])
    assert runs["data_age_max"][0] == result["data"]["data_age_max"]
    assert "| dqn | 0 | learner_step_budget |" in (out / "report.md").read_text()
    _assert_png(out / "curves.png")
    code, text = _python(
        warm_python, "compare.py", "--report_only", "--configs=ppo", f"--out={out}"
    )
    assert code == 2 and "no runs of ppo" in text, text[-2000:]


def _wait_for_checkpoint_after_success(run_dir, timeout_s: float) -> None:
    """Until a checkpoint newer than the first greedy success exists, the evaluator has
    saved that success's policy (it writes its row first: under load the two may be
    seconds apart), and two replay checkpoints are kept (a run that solves 4x4 within
    its first checkpoint period has only one when the first checkpoint after the
    success lands)."""
    ckpt_dir = checkpoints.learner.directory(str(run_dir))
    policy_dir = checkpoints.policy.directory(str(run_dir))
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        time.sleep(1)
        rows = metrics.read_csv(metrics.csv_path(str(run_dir), "evaluator"))
        solved = np.flatnonzero(rows["success_rate"] >= 1.0) if rows else []
        if not len(solved):
            continue
        version = rows["param_version"][solved[0]]
        has_checkpoint = os.path.exists(os.path.join(ckpt_dir, "manifest.json"))
        has_policy = os.path.exists(os.path.join(policy_dir, "manifest.json"))
        if (
            has_checkpoint
            and checkpoints.store.read_manifest(ckpt_dir)["version"] > version
            and has_policy
            and checkpoints.store.read_manifest(policy_dir, checkpoints.policy.POLICY)["version"]
            >= version
            and len(_replay_checkpoints(run_dir)) >= 2
        ):
            return
    pytest.fail(f"no checkpoint after the first success within {timeout_s} s")


def _kill_session(proc):
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    deadline = time.time() + 15
    while time.time() < deadline:
        left = [p for p in psutil.process_iter(["pid"]) if _in_session(p, proc.pid)]
        if not left:
            return
        time.sleep(0.5)
    raise AssertionError(f"processes survived the kill: {left}")


def _in_session(p, sid):
    try:
        return os.getsid(p.pid) == sid and p.status() != psutil.STATUS_ZOMBIE
    except (ProcessLookupError, psutil.NoSuchProcess):
        return False


@pytest.mark.slow
def test_local_mp_run_killed_with_sigkill_resumes_and_ends_at_least_as_good(tmp_path):
    run_dir = tmp_path / "run"
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "launch/train.py"),
            "--config=configs/dqn.py",
            f"--run_dir={run_dir}",
            "--config.checkpoint.every_seconds=2",
            "--config.evaluator.target_success=0",
            "--config.budget.env_steps=0",
            "--config.budget.seconds=400",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    ckpt_dir = checkpoints.learner.directory(str(run_dir))
    try:
        _wait_for_checkpoint_after_success(run_dir, timeout_s=240)
    finally:
        _kill_session(proc)
    before = checkpoints.store.read_manifest(ckpt_dir)
    success_before = metrics.last_row(metrics.csv_path(str(run_dir), "evaluator"))["success_rate"]
    assert not (run_dir / "result.json").exists()  # it really was killed, not finished
    heard = json.loads(pathlib.Path(counter.state_file(str(run_dir))).read_text())
    rows_before = len(metrics.read_csv(metrics.csv_path(str(run_dir), "evaluator"))["step"])
    # The killed run kept the policy it would have reported: the best, which solved it.
    kept_policy = policy.load_policy(str(run_dir))
    exact_before = exact_check.exact_answer(
        kept_policy.env, kept_policy.agent, kept_policy.params, kept_policy.agent.config.discount
    )
    assert exact_before["success"] == 1.0, (kept_policy.version, exact_before)
    # What the killed launcher could not clean up stayed inside the run directory
    # (until the resume below: it removes the folders of launchers no longer alive).
    left_by_the_kill = list((run_dir / "tmp").glob("launch-*"))
    assert [p for p in left_by_the_kill if (p / "learner.pkl").exists()], left_by_the_kill
    # The newest replay checkpoint cut by one byte: the resume keeps the newest
    # learner checkpoint and pairs it with the replay checkpoint before (never newer).
    kept = _replay_checkpoints(run_dir)
    assert len(kept) >= 2, kept
    chunks = kept[-1] / "chunks.tfrecord"
    os.truncate(chunks, chunks.stat().st_size - 1)
    resumed = subprocess.run(  # a fresh process, as a user resumes
        [
            sys.executable,
            str(ROOT / "launch/train.py"),
            f"--resume={run_dir}",
            "--config.evaluator.target_success=1",
            f"--config.budget.seconds={before['elapsed_seconds'] + 240:.0f}",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
        check=False,
    )
    code, out = resumed.returncode, resumed.stdout + resumed.stderr
    assert code == 0, out[-3000:]
    assert f"replay checkpoint skipped: {kept[-1]}: chunks.tfrecord is " in out, out[-3000:]
    assert (
        f"resuming from learner checkpoint {before['state_file']} (version {before['version']}) "
        f"and replay checkpoint {kept[-2].name} of an older round"
    ) in out, out[-3000:]
    result = json.loads((run_dir / "result.json").read_text())
    assert result["evaluation"]["success_rate"] >= success_before
    # Counts continue from the checkpoint (the resumed run may be done at its first
    # evaluation, when the checkpointed policy already reaches the target).
    assert result["counts"]["env_steps"] >= before["counts"]["env_steps"] > 0
    assert result["param_version"] >= before["version"] > 0
    # ... and never go back from what the counter had heard by the kill, after the
    # checkpoint: every count, every evaluation row, every version published.
    for name in ("env_steps", "episodes", "learner_steps", "param_version"):
        assert result["counts"][name] >= heard[name], (name, heard, result["counts"])
    assert result["param_version"] >= heard["param_version"]
    evaluator = metrics.read_csv(metrics.csv_path(str(run_dir), "evaluator"))
    for name in ("env_steps", "episodes", "param_version"):
        assert evaluator[name][rows_before:].min() >= heard[name], (name, heard[name])
    assert result["policy"]["version"] == result["param_version"]
    assert (run_dir / "logs" / "nodes-2" / "learner" / "0").stat().st_size > 0
    assert "success rate 1.000" in out and "[replay/0]" not in out
    assert not any(p.exists() for p in left_by_the_kill), left_by_the_kill
