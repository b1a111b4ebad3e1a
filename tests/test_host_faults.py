"""An env stepped in Python that fails, in real runs of launch/train.py: a bad name exits 2
before any node starts; an env that raises or hangs past config.env.step_timeout_s is
named in one line with its id, copy and step; fail-fast stops the run with exit 1,
and under the restart policy the actor restarts with fresh env copies and the run
ends normally. Nothing is left running."""

import json
import re

import pytest
from conftest import assert_nothing_left, launch_train

FAULTY = "--config.env.name=tests.gym_envs:faulty"
SHORT = [
    "--config=configs/ppo.py",
    "--config.evaluator.target_success=0",
    "--config.budget.env_steps=40000",
    "--config.evaluator.confirm_envs=100",
    "--config.evaluator.num_envs=100",
]


def _run(run_dir, args, timeout=300):
    proc = launch_train([*SHORT, f"--run_dir={run_dir}", *args])
    try:
        out, _ = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert_nothing_left(proc)
    return proc.returncode, out


def test_a_bad_gymnasium_name_exits_2_in_one_line_before_any_node(tmp_path):
    code, out = _run(tmp_path / "run", ["--config.env.name=gymnasium:Pendulum-v1"], 120)
    assert code == 2, out[-2000:]
    assert out.strip().splitlines()[-1] == (
        "distrl: bad config: config.env.name='gymnasium:Pendulum-v1': action space "
        "Box(-2.0, 2.0, (1,), float32): distrl's agents need Discrete actions"
    )
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
@pytest.mark.parametrize(
    "kwargs, extra, cause",
    [
        (
            {"how": "raise", "fail_at": 100},
            [],
            r"at step 100 \(step 20 of its episode\): step raised ValueError: the simulator "
            r"lost its state",
        ),
        (
            {"how": "hang", "fail_at": 100},
            ["--config.env.vector=async", "--config.env.step_timeout_s=3"],
            r": vector step 100 of its \d+ copies took longer than 3 s "
            r"\(config.env.step_timeout_s\)",
        ),
    ],
)
def test_a_failing_env_stops_a_fail_fast_run_naming_the_env_and_step(
    tmp_path, kwargs, extra, cause
):
    run_dir = tmp_path / "run"
    args = ["--fail_fast", FAULTY, f"--config.env.kwargs={json.dumps(kwargs)}", *extra]
    code, out = _run(run_dir, args)
    assert code == 1, out[-3000:]
    result = json.loads((run_dir / "result.json").read_text())
    assert result["failures"], result  # both actors' copies fail alike: one or both
    for node, line in result["failures"].items():
        assert node.startswith(("actor/", "evaluator")), result["failures"]
        assert line.startswith("raised EnvError: env tests.gym_envs:faulty"), line
        assert re.search(cause, line) and "\n" not in line, line
    assert any(
        f"distrl: {node} {line.split(' (exited')[0]}" in out
        for node, line in result["failures"].items()
    ), out[-3000:]
    assert "stopping the program" in out and "Traceback" not in out


@pytest.mark.slow
def test_under_restarts_the_actor_restarts_with_fresh_envs_and_the_run_ends(tmp_path):
    run_dir = tmp_path / "run"
    once = tmp_path / "failed_once"
    kwargs = {"how": "shape", "fail_at": 100, "once_file": str(once)}
    code, out = _run(run_dir, [FAULTY, f"--config.env.kwargs={json.dumps(kwargs)}"])
    assert code == 0, out[-3000:]
    assert once.exists()
    result = json.loads((run_dir / "result.json").read_text())
    assert result["stop_reason"] == "env_step_budget" and result["failures"] == {}, result
    [restart] = result["restarts"]
    assert restart["cause"].startswith("raised EnvError: env tests.gym_envs:faulty (copy ")
    assert "step returned an observation of shape (2,) and dtype float32" in restart["cause"]
    assert f"distrl: {restart['node']} {restart['cause']}; restarting it" in out, out[-3000:]
