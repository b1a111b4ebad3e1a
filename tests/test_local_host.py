"""The single-process trainer on envs stepped in Python (`distrl.local_host`): real
gymnasium envs, the real jitted data step, learning judged as `distrl.local` judges."""

import json
import signal
import time

import pytest
from conftest import assert_nothing_left, descendants, launch_train, load_config, wait_while_running

from distrl import config as config_lib
from distrl import local


def configured(name: str, **values):
    """configs/<name>.py with `values` set by their dotted paths."""
    config = load_config(name)
    config.update_from_flattened_dict(values)
    return config


def test_dqn_solves_gymnasium_frozenlake_judged_on_its_own_tables():
    """DQN on gymnasium's FrozenLake-v1 4x4 without slips in one process: it confirms a
    success lower bound of 0.999 over 10,000 host episodes, and the exact figures come
    from gymnasium's transition tables (the optimum succeeds with 1.0; V*(S) = 0.9^5)."""
    config = configured(
        "dqn",
        **{
            "env.name": "gymnasium:FrozenLake-v1",
            "env.kwargs": '{"is_slippery": false}',
            # an env stepped in Python declares no determinism: a Wilson bound, never 1.0
            "evaluator.target_success": 0.999,
            "evaluator.num_envs": 100,
            "budget.env_steps": 300_000,
        },
    )
    result = local.train(config)
    assert result.solved, result
    assert result.eval_episodes == 10_000 and result.success_low >= 0.999
    assert result.exact["optimal_success"] == 1.0 and result.exact["success"] == 1.0
    assert result.exact["optimal_value"] == pytest.approx(0.9**5)
    assert result.report  # FrozenLake is a grid: value and arrow grids
    assert result.env_steps < 300_000 and result.updates > 0
    assert [e[0] for e in result.evaluations] == sorted(e[0] for e in result.evaluations)


def test_sac_on_gymnasium_pendulum_stops_at_its_budget_the_same_with_subprocess_copies():
    """SAC on gymnasium's Pendulum-v1 to a budget of 2,048 env steps: the loop stops at the
    budget, takes samples_per_insert x T x B / batch updates per iteration once the
    buffer holds replay.min_size, evaluates at the evaluator's cadence, and reports the
    last policy on confirm_envs episodes. With env.vector=async (a process per copy) it
    trains exactly so: the same seeds give the same transitions, so the same updates,
    evaluations and last return."""
    values = {
        "budget.env_steps": 2_048,
        "replay.min_size": 512,
        "evaluator.every_env_steps": 512,
        "evaluator.num_envs": 4,
        "evaluator.confirm_envs": 8,
        "agent.hidden_sizes": (16, 16),  # the loop is judged here, not the learning
        "learner.batch_size": 16,
    }
    config = configured("sac_gymnasium_pendulum", **values)
    experiment_steps = config.num_actors * config.actor.num_envs * config.actor.unroll_length
    result = local.train(config)
    assert result.env_steps == 2_048 and result.iterations == 2_048 // experiment_steps
    per_iteration = round(
        config.replay.samples_per_insert * experiment_steps / config.learner.batch_size
    )
    waited = -(-512 // experiment_steps) - 1  # iterations before the buffer held 512
    assert result.updates == per_iteration * (result.iterations - waited)
    assert [e[0] for e in result.evaluations] == [512, 1024, 1536, 2048]
    assert result.eval_episodes == 8 and -2_000 < result.mean_return < 0
    assert not result.solved and not result.report

    copies = local.train(configured("sac_gymnasium_pendulum", **values, **{"env.vector": "async"}))
    assert [(e[0], e[2]) for e in copies.evaluations] == [(e[0], e[2]) for e in result.evaluations]
    assert (copies.updates, copies.mean_return) == (result.updates, result.mean_return)


def test_a_warm_up_rollout_is_refused_for_an_env_stepped_in_python():
    """n-step DQN's single-process data step starts with n - 1 steps of a JAX env's
    rollout: refused before anything compiles, naming the value."""
    config = configured("dqn_gymnasium_cartpole", **{"agent.n_step": 3})
    with pytest.raises(config_lib.ConfigError, match=r"agent.n_step=3's first window"):
        local.train(config)


def test_a_trainer_killed_with_sigkill_leaves_no_copy_behind(tmp_path):
    """`python -m distrl.local` with its copies in subprocesses, killed with SIGKILL while
    one copy hangs in its step: that copy (which would sleep on for an hour), the others,
    the forkserver that forked them and multiprocessing's resource tracker all end
    within seconds (each copy watches its trainer's pid)."""
    hung = tmp_path / "hung"  # made by the first copy to reach its 50th step, which hangs
    kwargs = json.dumps({"how": "hang", "fail_at": 50, "once_file": str(hung)})
    flags = ["--config=configs/ppo.py", "--config.env.name=tests.gym_envs:faulty"]
    flags += [f"--config.env.kwargs={kwargs}", "--config.env.vector=async"]
    flags += ["--config.num_actors=2", "--config.actor.num_envs=2"]
    flags += ["--config.evaluator.every_env_steps=1000000"]  # its copies are no subprocess
    proc = launch_train(flags, executable_args=["-m", "distrl.local"])
    try:
        wait_while_running(proc, time.time() + 120, hung.exists)
        copies = [
            p for p in descendants(proc.pid).values() if "forkserver" in " ".join(p.cmdline())
        ]
        assert len(copies) == 5  # the forkserver and the 4 copies it forked
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert_nothing_left(proc)
