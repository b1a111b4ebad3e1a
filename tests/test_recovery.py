"""Whole local_mp runs that go on through node deaths (distrl's supervisor, real
Launchpad and Reverb): a chaos run with one node of every group killed in turn, the
default program after an actor's SIGKILL, a fail-fast run that names its dead node,
and the learner's replay calls reconnecting after a replay restart. Their own file:
long runs, on a test worker of their own beside test_supervise.py's."""

import json
import signal
import time

import pytest
from conftest import assert_nothing_left, kill_node_when, launch_train
from conftest import node_process as _node_process
from conftest import wait_while_running as _wait_while_running


def _rows(run_dir, node: str):
    """The complete rows of logs/<node>.csv, as dicts of floats."""
    path = run_dir / "logs" / f"{node}.csv"
    if not path.exists():
        return []
    lines = path.read_text().splitlines()
    header = lines[0].split(",") if lines else []
    return [
        dict(zip(header, map(float, line.split(","))))
        for line in lines[1:]
        if line.count(",") == len(header) - 1
    ]


def _evaluator_rows(run_dir):
    return _rows(run_dir, "evaluator")


def _flowing_again(run_dir, since: float) -> bool:
    """Since `since`: the learner applied 30+ updates and the evaluator saw env steps
    and updates grow (every node of the pipeline up again)."""
    learner = [r for r in _rows(run_dir, "learner") if r["time"] > since]
    evaluator = [r for r in _evaluator_rows(run_dir) if r["time"] > since]
    return (
        len(learner) >= 2
        and learner[-1]["updates"] - learner[0]["updates"] >= 30
        and len(evaluator) >= 2
        and evaluator[-1]["env_steps"] > evaluator[0]["env_steps"]
        and evaluator[-1]["learner_steps"] > evaluator[0]["learner_steps"]
    )


def _perfect_since(run_dir, since: float) -> bool:
    """An evaluator row after `since` whose greedy success is 1.0."""
    return any(r["time"] > since and r["success_rate"] == 1.0 for r in _evaluator_rows(run_dir))


def _stopped_by_ctrl_c(proc, run_dir):
    """Ctrl-C to a live run, as a user stops it: exit 130; (its output, its result.json)."""
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, out[-4000:]
    return out, json.loads((run_dir / "result.json").read_text())


# The evaluator last: its restart is the slowest here (compiling its greedy rollout).
CHAOS_ORDER = ("actor/0", "counter", "replay", "learner", "evaluator")


@pytest.mark.slow
def test_chaos_one_node_of_every_group_killed_in_turn_and_the_run_still_solves(tmp_path):
    """local_mp DQN 4x4: SIGKILL of an actor, the counter, the replay, the learner and the
    evaluator, one after another, each once the pipeline flows again after the one before."""
    run_dir = tmp_path / "run"
    proc = launch_train(
        [
            "--config=configs/dqn.py",
            "--config.num_actors=2",
            f"--config.run_dir={run_dir}",
            # No target: the run trains on through every fault until the test stops it
            # (the budget only caps a run that never recovers).
            "--config.budget.seconds=400",
            "--config.budget.env_steps=0",
            "--config.evaluator.target_success=0",
            "--config.restart.max_per_node=2",
            "--config.restart.backoff_seconds=1",
            "--config.checkpoint.every_seconds=5",
        ]
    )
    injected = []
    try:
        deadline = time.time() + 600
        _wait_while_running(proc, deadline, lambda: len(_evaluator_rows(run_dir)) >= 2)
        for name in CHAOS_ORDER:
            victim = _node_process(proc.pid, run_dir, name)
            assert victim is not None and proc.poll() is None, (name, injected)
            victim.send_signal(signal.SIGKILL)
            injected.append((name, time.time()))
            _wait_while_running(
                proc,
                deadline,
                lambda name=name: (
                    _node_process(proc.pid, run_dir, name)
                    and _flowing_again(run_dir, injected[-1][1])
                ),
                why=(name, injected),
            )
        # After the last fault, a perfect policy; then the run is stopped as a user stops
        # it, and its final evaluation (10,000 episodes) must be perfect too.
        _wait_while_running(
            proc, deadline, lambda: _perfect_since(run_dir, injected[-1][1]), why=injected
        )
        out, result = _stopped_by_ctrl_c(proc, run_dir)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert result["stop_reason"] == "stopped", result
    assert result["evaluation"]["success_rate"] == 1.0
    assert [r["node"] for r in result["restarts"]] == list(CHAOS_ORDER), result["restarts"]
    assert all("killed by SIGKILL" in r["cause"] for r in result["restarts"])
    for name in CHAOS_ORDER:
        assert f"restarted {name} at" in out, out[-3000:]
    rows = _evaluator_rows(run_dir)
    for column in ("env_steps", "learner_steps"):
        values = [r[column] for r in rows]
        assert values == sorted(values), (column, values)
    assert_nothing_left(proc)


@pytest.mark.slow
def test_the_default_program_survives_an_actor_killed_with_sigkill(tmp_path):
    """`make run`'s program as it comes (restarts on): actor/0 SIGKILLed as soon as it
    runs is restarted, and the run still ends on its target, exit 0, with its result."""
    run_dir = tmp_path / "run"
    proc = launch_train(["--config=configs/dqn.py", f"--run_dir={run_dir}"])
    out, _ = kill_node_when(proc, run_dir, "actor/0", lambda: True, 300, 300)
    assert proc.returncode == 0, out[-3000:]
    cause = "exited with code -9 (killed by SIGKILL)"
    assert f"distrl: actor/0 {cause}; restarting it in 1.0 s (restart 1 of 3)" in out, out[-3000:]
    result = json.loads((run_dir / "result.json").read_text())
    assert result["stop_reason"] == "target_reached", result
    assert [(r["node"], r["cause"]) for r in result["restarts"]] == [("actor/0", cause)]
    assert result["failures"] == {}
    assert "actor/0 restarted, pid" in (run_dir / "logs" / "nodes" / "launcher").read_text()
    assert "restarted actor/0 at" in out and "Traceback" not in out, out[-3000:]
    assert_nothing_left(proc)


@pytest.mark.slow
def test_a_killed_node_of_a_fail_fast_run_is_named_in_one_line_and_the_learner_checkpoints(
    tmp_path,
):
    """Fail-fast (--fail_fast: no restarts): SIGKILL of the replay node ends the run with
    exit 1, one line naming the node and its cause, result.json naming it, the learner's
    final checkpoint written after the fault (it does not wait on Reverb), nothing left."""
    run_dir = tmp_path / "run"
    proc = launch_train(
        [
            "--config=configs/dqn.py",
            "--fail_fast",
            f"--config.run_dir={run_dir}",
            "--config.budget.seconds=600",
            "--config.evaluator.target_success=0",
            "--config.budget.env_steps=0",
        ]
    )
    out, killed_at = kill_node_when(
        proc, run_dir, "replay", lambda: len(_evaluator_rows(run_dir)) >= 3, 400, 120
    )
    assert proc.returncode == 1, out[-3000:]
    cause = "replay exited with code -9 (killed by SIGKILL)"
    assert f"distrl: {cause}; stopping the program" in out
    assert f"distrl: node failure, the program was stopped: {cause} (reports: " in out
    assert "Traceback" not in out and "RuntimeError" not in out, out[-3000:]
    result = json.loads((run_dir / "result.json").read_text())
    assert result["failures"] == {"replay": "exited with code -9 (killed by SIGKILL)"}, result
    assert (run_dir / "failures" / "replay.txt").read_text().startswith(cause.split(" ", 1)[1])
    newest = json.loads((run_dir / "checkpoints" / "learner" / "manifest.json").read_text())
    assert newest["written_at"] > killed_at, "the learner's final checkpoint is missing"
    saved = json.loads((run_dir / "config.json").read_text())
    assert saved["restart"]["max_per_node"] == 0  # what ran, as --fail_fast set it
    assert_nothing_left(proc)


@pytest.mark.slow
def test_the_learners_replay_calls_reconnect_after_a_replay_restart(tmp_path):
    """Prioritized DQN, local_mp: the replay node SIGKILLed and restarted. The learner's
    one replay connection (dataset, priority updates, checkpoints) reconnects once, its
    updates go on, a replay checkpoint round is sealed after the restart, and the
    learner itself never dies (its first client's calls used to wait out gRPC's
    reconnect, and once crashed it). Measured stalls: docs/faults.md."""
    run_dir = tmp_path / "run"
    proc = launch_train(
        [
            "--config=configs/dqn.py",
            f"--run_dir={run_dir}",
            "--config.replay.sampler=prioritized",
            "--config.budget.seconds=300",
            "--config.budget.env_steps=0",
            "--config.evaluator.target_success=0",
            "--config.checkpoint.every_seconds=2",
            "--config.log.every_seconds=0.5",
        ]
    )
    learner_log = run_dir / "logs" / "nodes" / "learner" / "0"
    kept = run_dir / "checkpoints" / "replay-kept"

    def sealed_since(t: float) -> bool:
        seals = kept.glob("*/distrl.json") if kept.exists() else []
        return any(seal.stat().st_mtime > t for seal in seals)

    try:
        deadline = time.time() + 300
        # killed once the learner samples steadily: killed at its first update's row, the
        # replay was back before any of the learner's reads stalled, and nothing
        # reconnected (seen once on CI, at b1de933)
        _wait_while_running(
            proc,
            deadline,
            lambda: (
                sealed_since(0) and any(row["updates"] >= 200 for row in _rows(run_dir, "learner"))
            ),
        )
        _node_process(proc.pid, run_dir, "replay").send_signal(signal.SIGKILL)
        killed_at = time.time()
        _wait_while_running(
            proc, deadline, lambda: "the learner reconnected" in learner_log.read_text()
        )
        reconnected_at = time.time()
        _wait_while_running(
            proc,
            deadline,
            lambda: sealed_since(reconnected_at) and _flowing_again(run_dir, reconnected_at),
        )
        _, result = _stopped_by_ctrl_c(proc, run_dir)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert [r["node"] for r in result["restarts"]] == ["replay"], result["restarts"]
    text = learner_log.read_text()
    assert text.count("the learner reconnected") == 1, text[-3000:]
    assert "checkpoint failed" not in text.split("the learner reconnected")[1], text[-3000:]
    updates = [r["updates"] for r in _rows(run_dir, "learner") if r["time"] > killed_at]
    assert updates == sorted(updates) and updates[-1] > updates[0], updates
    assert_nothing_left(proc)
