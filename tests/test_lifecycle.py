"""A node's lifecycle outside Launchpad (`distrl.nodes.lifecycle.InProcess`) and the
failure reports both lifecycles write (`distrl.records.failures`)."""

import threading

import pytest

from distrl.nodes.lifecycle import InProcess
from distrl.records import failures


def test_a_failing_body_is_reported_stops_the_nodes_sharing_it_and_raises(tmp_path):
    lifecycle = InProcess()
    flag = lifecycle.stop_flag()  # what a node keeps for its other threads
    with pytest.raises(KeyError), lifecycle.guard("actor/0", str(tmp_path)):
        raise KeyError("x")
    assert flag() and lifecycle.should_stop() and lifecycle.stop_event().is_set()
    (name, report), *others = failures.read_failures(str(tmp_path)).items()
    assert name == "actor/0" and not others
    assert failures.summary(report) == "raised KeyError: 'x'"
    assert "Traceback" in report and 'raise KeyError("x")' in report


def test_a_stop_request_wakes_a_waiting_node():
    lifecycle = InProcess()
    assert not lifecycle.should_stop() and not lifecycle.in_own_process()
    threading.Timer(0.05, lifecycle.request_stop).start()
    assert lifecycle.should_stop(wait_seconds=30.0)


def test_a_body_that_ends_leaves_no_report_and_no_stop(tmp_path):
    lifecycle = InProcess()
    with lifecycle.guard("learner", str(tmp_path)):
        pass
    assert not lifecycle.should_stop() and failures.read_failures(str(tmp_path)) == {}


def test_a_failure_several_processes_see_is_reported_once_by_the_first(tmp_path):
    """The hosts of a lost head's workers all see it: the first report stays."""
    assert failures.record_failure_once(str(tmp_path), "head", "seen first\n")
    assert not failures.record_failure_once(str(tmp_path), "head", "seen second\n")
    assert failures.read_failures(str(tmp_path)) == {"head": "seen first\n"}
