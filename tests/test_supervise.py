"""distrl's local supervisor on a small real Launchpad program (tests/supervise_program.py):
every way a node can die is named, restarted within the policy or ends the run, and no
node process outlives its launcher, however the launcher dies. Whole runs that go on
through node deaths are in test_recovery.py."""

import json
import os
import signal
import time

import psutil
import pytest
from conftest import ROOT, assert_nothing_left, launch_train
from conftest import descendants as _descendants
from conftest import node_pids as _node_pids

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


def test_a_learners_report_lands_whole_so_its_data_age_mean_never_exceeds_its_max():
    """The learner's sums, latest values and maxima reach the counter in one call: a
    reader sees all of a report or none of it (as separate calls under load, result.json
    once read a data age mean of 23.5 beside a max of 0)."""
    from distrl.nodes.counter import Counter, data_summary

    counter = Counter()
    reports = [(dict(learner_items=4, data_age_sum=94.0), 7, 40.0)]
    reports.append((dict(learner_items=4, data_age_sum=8.0), 9, 3.0))
    for sums, version, oldest in reports:
        totals = counter.report(sums, dict(param_version=version), dict(data_age_max=oldest))
        data = data_summary(totals)
        assert 0.0 <= data["data_age_mean"] <= data["data_age_max"], data
    assert data == dict(data_age_mean=12.75, data_age_max=40.0, items_written=0, items_learned=8)
    assert counter.get_counts()["param_version"] == 9


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
