"""The restart policy both launchers share (`distrl.program.restarts`): the backoff
doubles per failure of a node, `max_per_node` bounds each node's own failures, holders
restarted for a moved node are listed but not counted, and a restart's failure report
moves to failures/restarted/."""

import os
import time

import ml_collections
import pytest

from distrl.program import restarts, stopping
from distrl.records import failures


def _policy(run_dir, max_per_node=3, backoff_seconds=0.5, began=None):
    config = ml_collections.ConfigDict(
        {"max_per_node": max_per_node, "backoff_seconds": backoff_seconds}
    )
    return restarts.RestartPolicy(config, str(run_dir), time.time() if began is None else began)


def _fail(policy, run_dir, name, cause="exited with code -9 (killed by SIGKILL)", **extra):
    """A failure of `name` as a launcher meets it: its report written, then the decision."""
    failures.record_failure(str(run_dir), name, f"{cause}\n\nlast output: ...\n")
    return policy.after_failure(name, cause, **extra)


def test_the_backoff_doubles_per_failure_and_the_node_gives_up_after_max_per_node(tmp_path):
    policy = _policy(tmp_path, max_per_node=3, backoff_seconds=0.5)
    decided = [_fail(policy, tmp_path, "replay") for _ in range(4)]
    assert [(r.delay, r.number, r.limit) for r in decided[:3]] == [
        (0.5, 1, 3),
        (1.0, 2, 3),
        (2.0, 3, 3),
    ]
    assert decided[3] is None  # the fourth failure ends the run
    assert [r.describe() for r in decided[:3]] == [
        "restart 1 of 3",
        "restart 2 of 3",
        "restart 3 of 3",
    ]
    assert restarts.restart_delay(1.0, 0) == 1.0 and restarts.restart_delay(1.0, 4) == 16.0
    # The report of the failure that ended the run stays where it ends the run.
    assert failures.read_failure(str(tmp_path), "replay") is not None
    assert [r["restart"] for r in policy.restarts] == [1, 2, 3]


def test_fail_fast_gives_up_at_the_first_failure_and_lists_nothing(tmp_path):
    policy = _policy(tmp_path, max_per_node=0)
    assert _fail(policy, tmp_path, "learner") is None
    assert policy.restarts == []
    assert list(failures.read_failures(str(tmp_path))) == ["learner"]


def test_each_node_is_counted_on_its_own(tmp_path):
    policy = _policy(tmp_path, max_per_node=1, backoff_seconds=2.0)
    first = _fail(policy, tmp_path, "actor/0")
    other = _fail(policy, tmp_path, "actor/1")
    assert (first.delay, first.number) == (2.0, 1) and (other.delay, other.number) == (2.0, 1)
    assert _fail(policy, tmp_path, "actor/0") is None
    assert policy.attempt("actor/0") == 1 and policy.attempt("actor/1") == 1
    assert policy.attempt("learner") == 0  # never restarted: its first start


def test_a_restart_is_listed_and_its_report_moved(tmp_path):
    began = time.time() - 12.34
    policy = _policy(tmp_path, backoff_seconds=0.25, began=began)
    _fail(policy, tmp_path, "actor/2", "raised ValueError: x", host="host a")
    [entry] = policy.restarts
    report = tmp_path / "failures" / "restarted" / "actor_2-1.txt"
    assert entry == {
        "node": "actor/2",
        "cause": "raised ValueError: x",
        "restart": 1,
        "at_seconds": pytest.approx(12.3, abs=0.2),
        "backoff_seconds": 0.2,  # round(0.25, 1)
        "report": str(report),
        "host": "host a",
    }
    assert report.read_text().startswith("raised ValueError: x")
    assert failures.read_failures(str(tmp_path)) == {}  # it no longer ends the run


def test_holders_restarted_for_a_moved_node_are_listed_but_not_counted(tmp_path):
    policy = _policy(tmp_path, max_per_node=1, backoff_seconds=1.0)
    cause = "restarted: replay moved to host b"
    failures.record_failure(str(tmp_path), "learner", cause)
    entry = policy.listed("learner", cause, 0.0)
    assert (entry["restart"], entry["backoff_seconds"]) == (1, 0.0)
    assert policy.attempt("learner") == 1
    # Its own failure is still its first: restarted, after the first backoff, as its
    # second restart listed (report learner-2.txt).
    own = _fail(policy, tmp_path, "learner")
    assert (own.delay, own.number) == (1.0, 1)
    assert policy.restarts[-1]["restart"] == 2
    assert os.path.exists(tmp_path / "failures" / "restarted" / "learner-2.txt")
    assert policy.attempt("learner") == 2
    assert _fail(policy, tmp_path, "learner") is None


def test_a_removed_actor_added_again_starts_with_no_failures(tmp_path):
    policy = _policy(tmp_path, max_per_node=1)
    _fail(policy, tmp_path, "actor/3")
    policy.forget("actor/3")  # removed by a scale request; the same id added later
    assert policy.attempt("actor/3") == 0
    again = _fail(policy, tmp_path, "actor/3")
    assert again.number == 1
    assert len(policy.restarts) == 2  # what was listed stays listed


def test_nodes_stop_in_phases_actors_and_evaluator_first_then_the_learner():
    names = ["replay", "counter", "learner", "actor/0", "actor/1", "evaluator"]
    assert stopping.stop_phases(names) == [
        ["actor/0", "actor/1", "evaluator"],
        ["learner"],
        ["replay", "counter"],
    ]
