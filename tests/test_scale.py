"""Actors added and removed during a live local_mp run (`launch/scale.py`): real
processes, a real run; and the command's refusals of bad input (exit 2, one line)."""

import json
import os
import subprocess
import sys
import time

import pytest
from conftest import ROOT, assert_nothing_left, launch_train
from conftest import node_process as _node_process
from conftest import wait_while_running as _wait_while_running
from test_recovery import _rows, _stopped_by_ctrl_c

from distrl import experiment as experiment_lib
from distrl.nodes.actor import actor_epsilon
from distrl.program import launcher, scaling
from distrl.records import rundir

SCALE = [sys.executable, str(ROOT / "launch" / "scale.py")]


def _scale(run_dir, *args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*SCALE, f"--run_dir={run_dir}", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )


def _env_steps(run_dir) -> float:
    """The run's env steps as the counter last saved them (it saves each change)."""
    try:
        return json.loads((run_dir / "checkpoints" / "counter.json").read_text())["env_steps"]
    except (OSError, ValueError, KeyError):
        return 0.0


def _grows(run_dir, by: float = 5000):
    """A function that is true once the run's env steps grew `by` from now."""
    start = _env_steps(run_dir)
    return lambda: _env_steps(run_dir) >= start + by


def _acting(run_dir, actor: int, since: float) -> bool:
    """Actor `actor` wrote a metrics row with env steps after `since`."""
    return any(
        r["time"] > since and r["env_steps_per_s"] > 0 for r in _rows(run_dir, f"actor_{actor}")
    )


@pytest.mark.slow
def test_actors_scaled_2_to_4_to_1_while_the_run_goes_on(tmp_path):
    run_dir = tmp_path / "run"
    proc = launch_train(
        [
            "--config=configs/dqn.py",
            f"--run_dir={run_dir}",
            "--config.num_actors=2",
            "--config.budget.seconds=300",
            "--config.budget.env_steps=0",
            "--config.evaluator.target_success=0",
            "--config.log.every_seconds=0.5",
            "--config.actor.epsilon_spread=7.0",  # Ape-X's: each actor explores its own way
        ]
    )
    try:
        deadline = time.time() + 240
        # scaled once the learner has published: then an added actor's first params are
        # the learner's (scaled before, an added actor came up with version 0: CI at ddb4b60)
        _wait_while_running(
            proc,
            deadline,
            lambda: _acting(run_dir, 1, 0) and any(r["updates"] for r in _rows(run_dir, "learner")),
        )
        asked = time.time()
        grown = _scale(run_dir, "--actors=4")
        assert grown.returncode == 0, grown.stderr
        assert "actors 2 -> 4; added actor/2, actor/3" in grown.stdout, grown.stdout
        _wait_while_running(
            proc, deadline, lambda: _acting(run_dir, 2, asked) and _acting(run_dir, 3, asked)
        )
        _wait_while_running(proc, deadline, _grows(run_dir))
        for actor in (2, 3):  # the learner's latest params, its own exploration
            first = next(r for r in _rows(run_dir, f"actor_{actor}") if r["time"] > asked)
            assert first["param_version"] > 0, first
        spread = {r["epsilon"] for a in range(4) for r in _rows(run_dir, f"actor_{a}")[-1:]}
        assert len(spread) >= 3, spread  # actor 1 of 2 and actor 3 of 4 share the least

        asked = time.time()
        shrunk = _scale(run_dir, "--actors=1")
        assert shrunk.returncode == 0, shrunk.stderr
        assert "actors 4 -> 1; removed actor/3, actor/2, actor/1" in shrunk.stdout, shrunk.stdout
        log = run_dir / "logs" / "nodes" / "launcher"
        _wait_while_running(
            proc,
            deadline,
            lambda: all(
                f"actor/{i} removed: exited with code 0" in log.read_text() for i in (1, 2, 3)
            ),
        )
        assert all(_node_process(proc.pid, run_dir, f"actor/{i}") is None for i in (1, 2, 3))
        _wait_while_running(proc, deadline, _grows(run_dir))  # actor/0 alone goes on
        out, result = _stopped_by_ctrl_c(proc, run_dir)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "distrl: actors 2 -> 4: added actor/2, actor/3" in out, out[-3000:]
    assert result["restarts"] == [] and result["failures"] == {}, result
    changes = scaling.history(str(run_dir))
    assert [(c["cause"], c["before"], c["actors"]) for c in changes] == [
        ("launch", 0, 2),
        ("request", 2, 4),
        ("request", 4, 1),
    ], changes
    steps = [r["env_steps"] for r in _rows(run_dir, "evaluator")]
    assert steps == sorted(steps) and steps[-1] > steps[0], steps
    assert not list((run_dir / "tmp").iterdir())
    assert_nothing_left(proc)

    # --resume takes the current count.
    config = rundir.load_config(str(run_dir))
    assert config.num_actors == 2  # what it was launched with
    launcher._scaled_count(config, str(run_dir), "local_mp")
    assert config.num_actors == 1


@pytest.mark.parametrize(
    "where,args,says",
    [
        ("nowhere", ["--actors=2"], "is not a run directory (no config.json)"),
        ("run", [], "bad flag"),  # no --actors
        ("run", ["--actors=0"], "a run needs at least 1 actor"),
        ("run", ["--actors=100000"], "more than this machine's"),
        ("run", ["--actors=2"], "is not live (no launcher holds it)"),
        ("gated", ["--actors=4"], "this run gates its actors"),
    ],
)
def test_bad_scale_requests_exit_2_in_one_line(tmp_path, warm_python, where, args, says):
    """Checked in this order: the run directory, the count (the saved config's rules,
    this machine's memory: the upper bound), then whether a local_mp launcher holds it."""
    from distrl import config as config_lib

    rundir.write_config(config_lib.base_config("dqn"), str(tmp_path / "run"))
    gated = config_lib.base_config("ppo")
    gated.actor.chunks_per_version = 1
    rundir.write_config(gated, str(tmp_path / "gated"))
    code, out, _ = warm_python.run("launch/scale.py", f"--run_dir={tmp_path / where}", *args)
    assert code == 2 and says in out, (code, out)
    assert len(out.strip().splitlines()) == 1, out


def test_an_added_actor_explores_as_one_of_the_new_count_from_the_runs_share(tmp_path):
    """`topology.ActorMaker.added`: actor 2 of 4 gets a config of 4 actors (its place in
    Ape-X's epsilon spread, the schedule counting 4 actors) and starts its env steps at
    its share of the counter's total (+1: its key always differs from the launch's)."""
    from distrl import config as config_lib
    from distrl.program.topology import make_program

    config = config_lib.base_config("dqn")
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "counter.json").write_text(json.dumps({"env_steps": 40_000}))
    program = make_program(experiment_lib.make(config), str(tmp_path), time.time())
    node = program.more_actors.added(2, 4)
    actor_experiment, actor_id, *_, start_steps = node._args  # Launchpad keeps them there
    assert (actor_experiment.config.num_actors, actor_id, start_steps) == (4, 2, 10_001)
    assert config.num_actors == 2  # the program's own config is untouched
    assert actor_epsilon(0.4, 2, 4, 7.0) == pytest.approx(0.4 ** (1 + 7 * 2 / 3))


@pytest.mark.parametrize(
    "count,actors,busy,first_out,out,added",
    [
        (4, ["actor/0", "actor/1"], [], [], [], [2, 3]),  # grow: the next ids
        (
            1,
            ["actor/0", "actor/1", "actor/2", "actor/3"],
            [],
            [],
            ["actor/3", "actor/2", "actor/1"],
            [],
        ),
        (3, ["actor/0", "actor/1"], [2], [], [], [3]),  # actor/2 still ending: not reused yet
        # a machine left with actors 1 and 3: they go first, then the count is made up
        (
            2,
            ["actor/0", "actor/1", "actor/2", "actor/3"],
            [],
            ["actor/1", "actor/3"],
            ["actor/1", "actor/3"],
            [],
        ),
        (4, ["actor/0", "actor/2"], [], [], [], [1, 3]),  # the lowest free ids
        (3, ["actor/0", "actor/1", "actor/2"], [], ["actor/1"], ["actor/1"], [3]),
    ],
)
def test_plan_removes_the_named_then_the_newest_and_adds_the_lowest_free_ids(
    count, actors, busy, first_out, out, added
):
    assert scaling.plan(count, actors, busy, first_out) == (out, added)


def test_a_change_says_what_it_did():
    grown = scaling.Change(4, 2, ["actor/2", "actor/3"], [], "request", "x")
    assert grown.describe() == "actors 2 -> 4: added actor/2, actor/3"
    left = scaling.Change(2, 4, [], ["actor/1", "actor/3"], "cluster")
    assert left.describe() == "actors 4 -> 2 (the cluster changed): removing actor/1, actor/3"
    refused = scaling.Change(2, 2, [], [], "request", "x", "too many", bad_input=True)
    assert refused.describe() == "scale request refused: too many"


def test_a_ray_run_that_follows_the_cluster_refuses_requests_and_memory_is_not_its_bound(
    tmp_path,
):
    """This process holds the run directory as a live Ray launcher does (its lock, its
    work directory naming launch type "ray"): a count beyond this machine's memory is not
    refused here (the cluster's CPUs bound it, answered by the launcher), and a run with
    ray.actors=auto refuses every request (exit 2, one line)."""
    from distrl import config as config_lib

    run_dir = tmp_path / "run"
    config = config_lib.base_config("dqn")
    config.ray.actors = "auto"
    rundir.write_config(config, str(run_dir))
    with rundir.locked(str(run_dir)):
        scaling.open_work_dir(str(run_dir), "ray")
        assert scaling.launch_type(str(run_dir), os.getpid()) == "ray"
        refused = _scale(run_dir, "--actors=100000")
    assert refused.returncode == 2, refused
    assert "follows the Ray cluster (config.ray.actors=auto)" in refused.stderr, refused.stderr
    assert "more than this machine's" not in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
