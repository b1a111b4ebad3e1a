"""distrl's local supervisor on a small real Launchpad program (tests/supervise_program.py):
every way a node can die is named, restarted within the policy or ends the run, and no
node process outlives its launcher, however the launcher dies."""

import json
import os
import signal
import time

import psutil
import pytest
from conftest import ROOT, assert_nothing_left, launch_train
from conftest import descendants as _descendants
from conftest import node_pids as _node_pids
from conftest import node_process as _node_process
from conftest import wait_while_running as _wait_while_running

PROGRAM = str(ROOT / "tests" / "supervise_program.py")


def _run(run_dir, mode: str, max_restarts: int):
    proc = launch_train([], executable_args=[PROGRAM, str(run_dir), mode, str(max_restarts)])
    out, _ = proc.communicate(timeout=180)
    assert proc.returncode == 0, out[-3000:]
    assert_nothing_left(proc)
    return out, json.loads(out.strip().splitlines()[-1])


def test_each_death_is_named_and_the_node_restarted_within_the_policy(tmp_path):
    out, outcome = _run(tmp_path / "run", "faults", 3)
    causes = [r["cause"] for r in outcome["restarts"]]
    assert causes == [
        "exited with code -9 (killed by SIGKILL)",
        "raised ValueError: injected in attempt 1 (exited with code 1)",
        "exited with code -6 (killed by SIGABRT)",
    ], outcome
    assert [r["restart"] for r in outcome["restarts"]] == [1, 2, 3]
    assert outcome["failures"] == {}  # every death was restarted: none ended the run
    for r in outcome["restarts"]:
        assert os.path.exists(r["report"]), r
        assert f"victim {r['cause']}; restarting it" in out  # one line each in the terminal
    assert "Traceback" not in out
    with open(outcome["restarts"][1]["report"]) as f:
        assert "ValueError: injected in attempt 1" in f.read().splitlines()[-1]


def test_a_death_beyond_the_policy_stops_every_node_and_is_named(tmp_path):
    run_dir = tmp_path / "run"
    out, outcome = _run(run_dir, "fatal", 0)  # fail-fast: max_per_node=0
    assert outcome["restarts"] == []
    assert outcome["failures"] == {"victim": "exited with code -9 (killed by SIGKILL)"}, outcome
    assert "victim exited with code -9 (killed by SIGKILL); stopping the program" in out
    log = (run_dir / "logs" / "nodes" / "launcher").read_text()
    assert "sleeper ended: exited with code 0" in log, log  # stopped by SIGTERM, cleanly
    assert not list((run_dir / "tmp").iterdir())  # the node pickles are gone


def _node_processes(launcher_pid: int, run_dir, count: int, timeout_s: float = 120.0):
    """The launcher's `count` node processes (each one a descendant of it), once they all run."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        descendants = _descendants(launcher_pid)
        nodes = [descendants[pid] for pid in _node_pids(run_dir).values() if pid in descendants]
        if len(nodes) >= count:
            return nodes
        time.sleep(0.2)
    raise AssertionError(f"the launcher started {len(nodes)} of {count} nodes")


# A hang-up of the whole process group: what closing the terminal does.
@pytest.mark.parametrize(
    "sig,group",
    [(signal.SIGKILL, False), (signal.SIGHUP, False), (signal.SIGHUP, True)],
    ids=["sigkill", "sighup", "terminal-closed"],
)
def test_no_node_outlives_its_launcher(tmp_path, sig, group):
    proc = launch_train([], executable_args=[PROGRAM, str(tmp_path / "run"), "hang", "0"])
    try:
        nodes = _node_processes(proc.pid, tmp_path / "run", 2)
        time.sleep(2.0)  # every node inside its body
        if group:
            os.killpg(proc.pid, sig)
        else:
            proc.send_signal(sig)
        proc.wait(timeout=60)
        # SIGHUP: an orderly stop (nodes ignore the hang-up); SIGKILL: the parent-death signal.
        deadline = time.time() + 15
        while any(n.is_running() and n.status() != psutil.STATUS_ZOMBIE for n in nodes):
            assert time.time() < deadline, [n.cmdline() for n in nodes if n.is_running()]
            time.sleep(0.2)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert_nothing_left(proc)
    if sig == signal.SIGHUP:  # stopped in order by the launcher, not hung up
        log = (tmp_path / "run" / "logs" / "nodes" / "launcher").read_text()
        assert "interrupted; stopping every node" in log and "SIGHUP" not in log, log


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
    try:
        deadline = time.time() + 300
        victim = _wait_while_running(
            proc, deadline, lambda: _node_process(proc.pid, run_dir, "actor/0"), period_s=0.1
        )
        victim.send_signal(signal.SIGKILL)
        out, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
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
    try:
        deadline = time.time() + 400
        _wait_while_running(proc, deadline, lambda: len(_evaluator_rows(run_dir)) >= 3)
        _node_process(proc.pid, run_dir, "replay").send_signal(signal.SIGKILL)
        killed_at = time.time()
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
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
        _wait_while_running(proc, deadline, lambda: sealed_since(0) and _rows(run_dir, "learner"))
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


def test_a_restarted_counter_continues_from_its_totals(tmp_path, monkeypatch):
    from distrl.nodes import lifecycle
    from distrl.nodes.counter import Counter

    path = str(tmp_path / "checkpoints" / "counter.json")
    first = Counter({"env_steps": 100.0}, path)  # a resumed run's counter
    first.increment(env_steps=24, episodes=2)
    first.set(param_version=7)
    seen = first.get_counts()
    monkeypatch.setenv(lifecycle.ATTEMPT_ENV, "1")  # its process died; this is the restart
    restarted = Counter({"env_steps": 100.0}, path).get_counts()
    for name in ("env_steps", "episodes", "param_version"):
        assert restarted[name] == seen[name], name
    monkeypatch.setenv(lifecycle.ATTEMPT_ENV, "0")  # a new launch starts from its initial counts
    assert Counter({"env_steps": 5.0}, path).get_counts()["env_steps"] == 5.0


def test_a_restarted_learner_loads_the_newest_checkpoint_and_publishes_newer_versions(
    tmp_path, monkeypatch
):
    import jax
    from conftest import load_config

    from distrl import checkpoints
    from distrl import experiment as experiment_lib
    from distrl.nodes import lifecycle
    from distrl.nodes.counter import Counter, state_file
    from distrl.nodes.learner import Learner

    config = load_config("dqn")
    agent = experiment_lib.Experiment(config).agent
    saved = agent.init(jax.random.PRNGKey(11))
    run_dir = str(tmp_path)
    checkpoints.store.save(checkpoints.learner.directory(run_dir), saved, 40, {"algorithm": "dqn"})
    counter = Counter(None, state_file(run_dir))  # the run's counter, keeping its record
    counter.set(param_version=95)  # what it served before it died
    monkeypatch.setenv(lifecycle.ATTEMPT_ENV, "1")
    learner = Learner(experiment_lib.Experiment(config), None, counter, run_dir, time.time())
    state, version, _ = learner.initial_state(agent)
    assert version == 96
    for a, b in zip(jax.tree.leaves(saved), jax.tree.leaves(state), strict=True):
        assert (jax.device_get(a) == jax.device_get(b)).all()


def test_an_evaluator_starts_from_the_counters_first_answer(tmp_path):
    """A counter that does not answer yet (restarting, or moving to another machine):
    the evaluator's first row waits for its totals instead of logging zeros."""
    from distrl.nodes.counter import Counter
    from distrl.nodes.evaluator import first_counts

    class Restarting(Counter):
        def __init__(self, unanswered: int):
            super().__init__({"env_steps": 3072.0})
            self.unanswered = unanswered

        def get_counts(self):
            if self.unanswered:
                self.unanswered -= 1
                raise ConnectionError("the counter is not up yet")
            return super().get_counts()

    counter, waited = Restarting(unanswered=2), []
    counts = first_counts(counter, lambda s: waited.append(s) or False, {})
    assert counts["env_steps"] == 3072.0 and waited == [1.0, 1.0]
    # A program that stops before any answer ends the wait with the fallback.
    assert first_counts(Restarting(unanswered=10**6), lambda s: True, {"x": 1.0}) == {"x": 1.0}
