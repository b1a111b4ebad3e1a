"""Envs stepped in Python in real runs of launch/train.py (Launchpad, Reverb, node
processes): gymnasium's FrozenLake learns to its exact optimum, judged on gymnasium's
own tables; a bad name exits 2 before any node starts; an env that raises, hangs past
config.env.step_timeout_s or returns a wrong shape is named in one line with its id,
copy and step; fail-fast stops the run with exit 1, and under the restart policy the
actor restarts with fresh env copies and the run ends normally. Nothing is left
running."""

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
# A fault at step 100 needs no more copies than these: with env.vector=async each copy is
# a process, and 2 actors x 64 + 100 evaluation copies swamped a loaded 2-core machine.
FEW = ["--config.actor.num_envs=4", "--config.evaluator.num_envs=4"]


def _run(run_dir, args, timeout=300):
    proc = launch_train([*SHORT, f"--run_dir={run_dir}", *args])
    try:
        out, _ = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert_nothing_left(proc)
    return proc.returncode, out


def test_a_bad_gymnasium_name_exits_2_in_one_line_before_any_node(tmp_path, warm_python):
    blackjack = [
        "--config.env.name=gymnasium:Blackjack-v1",
        '--config.env.kwargs={"max_episode_steps": 9}',
    ]
    code, out, _ = warm_python.run(
        "launch/train.py", *SHORT, f"--run_dir={tmp_path}/run", *blackjack
    )
    assert code == 2, out[-2000:]
    assert out.strip().splitlines()[-1] == (
        "distrl: bad config: config.env.name='gymnasium:Blackjack-v1': observation space "
        "Tuple(Discrete(32), Discrete(11), Discrete(2)): need a Box (any shape) or a "
        "Discrete (one-hot)"
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
    args = ["--fail_fast", FAULTY, f"--config.env.kwargs={json.dumps(kwargs)}", *FEW, *extra]
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


@pytest.mark.slow
def test_gymnasium_frozenlake_learns_and_is_judged_on_its_own_tables(tmp_path):
    """DQN on gymnasium's FrozenLake-v1 4x4 without slips, stepped in Python by 2 actors:
    the run confirms a success lower bound of 0.999 on 10,000 episodes, and the exact
    figures come from gymnasium's transition tables (the optimum succeeds with 1.0;
    V*(S) = 0.9^5)."""
    run_dir = tmp_path / "run"
    proc = launch_train(
        [
            "--config=configs/dqn.py",
            "--config.env.name=gymnasium:FrozenLake-v1",
            '--config.env.kwargs={"is_slippery": false}',
            # no env stepped in Python declares itself deterministic, so success is a
            # Wilson bound over 10,000 episodes (0.9996 at 10,000 of 10,000), never 1.0
            "--config.evaluator.target_success=0.999",
            # the routine evaluations (each second) of 100 episodes, not 1,000: the
            # untrained policy's 1,000 episodes of 100 steps in Python held the first
            # one back past 120k env steps (a run of 26 CPU s, now 17-21)
            "--config.evaluator.num_envs=100",
            f"--run_dir={run_dir}",
        ]
    )
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, out[-3000:]
    assert_nothing_left(proc)
    result = json.loads((run_dir / "result.json").read_text())
    assert result["stop_reason"] == "target_reached", result
    assert result["evaluation"]["episodes"] == 10_000
    assert result["evaluation"]["success_low"] >= 0.999  # Wilson, 10,000 of 10,000
    exact = result["exact"]
    assert exact["optimal_success"] == 1.0 and exact["success"] == 1.0, exact
    assert exact["optimal_value"] == pytest.approx(0.9**5), exact
    assert result["map"] == ["SFFF", "FHFH", "FFFH", "HFFG"]
