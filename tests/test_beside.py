"""distrl.program.beside without a real program (the stage benchmarks run real ones,
tests/test_bench_sections.py): the task runs once every node started, its end stops
the program, and its result or exception comes back in the caller's thread."""

import os
import threading
import time

import pytest

from distrl.program import beside, supervisor


def _supervisor(tmp_path, seen: dict):
    """A stand-in for `supervisor.run`: starts the task, then waits for its stop file."""

    def run(program, config, run_dir, envs, stream, terminal, **kw):
        seen.update(kw, terminal=terminal, max_per_node=config.restart.max_per_node)
        stop_file = str(tmp_path / "stop")
        kw["started"](stop_file)
        deadline = time.monotonic() + 10
        while not os.path.exists(stop_file) and time.monotonic() < deadline:
            time.sleep(0.01)
        seen["stopped"] = os.path.exists(stop_file)
        return []

    return run


def test_the_task_runs_beside_the_program_which_stops_when_it_returns(tmp_path, monkeypatch):
    seen = {}
    monkeypatch.setattr(supervisor, "run", _supervisor(tmp_path, seen))
    caller = threading.current_thread()
    result = beside.run(None, str(tmp_path), {}, lambda: threading.current_thread(), "logs")
    assert result is not caller  # the task's own thread; the supervisor keeps the caller's
    assert seen["stopped"] and seen["output_dir"] == "logs"
    assert seen["terminal"] == "output_to_files" and seen["max_per_node"] == 0


def test_a_task_that_raises_stops_the_program_and_raises_in_the_caller(tmp_path, monkeypatch):
    seen = {}
    monkeypatch.setattr(supervisor, "run", _supervisor(tmp_path, seen))

    def task():
        raise ValueError("measured nothing")

    with pytest.raises(ValueError, match="measured nothing"):
        beside.run(None, str(tmp_path), {}, task)
    assert seen["stopped"] and seen["terminal"] == "current_terminal"
