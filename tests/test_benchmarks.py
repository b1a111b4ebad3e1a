"""The benchmarks still import and run: every module imports, the quickest section
(ceilings, at a tiny size) measures real numbers into its rows, and the table's
rows, start-up and memory figures are computed as benchmarks/README.md says."""

import dataclasses
import importlib
import json
import math
import os
import pkgutil
import signal
import subprocess
import sys
import time

import jax
import numpy as np
import pytest

import benchmarks
from benchmarks import rows, run, stages
from benchmarks.monitor import STRETCH, Monitor, node_memory
from distrl import experiment as experiment_lib
from distrl import local
from distrl.config import ConfigError


def test_every_benchmarks_module_imports():
    names = [m.name for m in pkgutil.iter_modules(benchmarks.__path__)]
    assert {"run", "rows", "ceilings", "stages", "solve", "cluster"} <= set(names)
    for name in names:
        importlib.import_module(f"benchmarks.{name}")


def test_rows_take_ratios_goals_and_errors_from_the_results():
    results = {
        "ceilings": {
            "dqn": {"rollout": {"steps_per_s": 1000.0}, "update": {"samples_per_s": 400.0}},
        },
        "stages": {"dqn": {"actor": {"env_steps_per_s": 600.0}, "learner": {"error": "boom"}}},
        "e2e": {"dqn": {"env_steps_per_s": 100.0}},
        "solve": {
            "dqn": {"wall": 12.0, "reached": True, "up_at": 4.0, "summary": "ok"},
            "ppo": {"wall": 30.0, "reached": False, "summary": "not reached"},
        },
    }
    by_name = {r.name: r for r in rows.build_rows(results)}
    actor = by_name["dqn 1 actor alone: env steps/s"]
    assert (actor.ratio, actor.goal, actor.status) == (0.6, ">= 0.5x", "PASS")
    e2e = by_name["dqn 2 actors, SPI 1: env steps/s"]
    assert e2e.ceiling == 400.0 and e2e.status == "MISS"  # the lower of the two ceilings
    assert by_name["dqn learner alone (pre-filled table): updates/s"].note == "boom"
    assert by_name["ppo 1 actor alone: env steps/s"].note == "not run"
    exit_rows = [r for r in by_name.values() if "start to exit" in r.name]
    assert [(r.figure, r.status) for r in exit_rows] == [(12.0, "MISS"), (None, "—")]
    assert exit_rows[1].note == "not reached"  # a run that did not solve has no time
    first_eval = by_name["dqn 4x4, 2 actors: command to first evaluation"]
    assert (first_eval.figure, first_eval.status) == (4.0, "PASS")
    sac = {  # SAC's learner alone against its jitted update: issue 36's goal of 0.5x
        "ceilings": {"sac_pendulum": {"update": {"updates_per_s": 200.0}}},
        "stages": {"sac_pendulum": {"learner": {"updates_per_s": 90.0}}},
    }
    learner = {r.name: r for r in rows.build_rows(sac)}[
        "sac_pendulum learner alone (pre-filled table): updates/s"
    ]
    assert (learner.ratio, learner.goal, learner.status) == (0.45, ">= 0.5x", "MISS")


def test_startup_is_the_last_node_to_step():
    seen = {
        "table_inserts": 5.0,
        "env_steps": 5.5,
        "learner_steps": 7.0,
        "table_samples": 6.0,
        "actor_0": 4.0,
        "actor_1": 6.5,
        "evaluator": 6.0,
    }
    out = stages.summarize_startup(seen, num_actors=2)
    assert (out["first_insert"], out["first_update"], out["actors"]) == (5.0, 7.0, 6.5)
    assert out["every_node"] == 7.0
    del seen["actor_1"]  # an actor that never stepped: no time for every node
    assert stages.summarize_startup(seen, num_actors=2)["every_node"] is None


def test_node_memory_names_each_node_by_its_output_file(tmp_path):
    """A node forked by the preloaded parent (a grandchild here) is found by its output
    file too; the parent's own, the supervisor's log `launcher`, names no node."""
    os.makedirs(tmp_path / "actor")
    node = f"exec {sys.executable} -c 'import time; time.sleep(60)' > {tmp_path}/actor/0"
    with open(tmp_path / "launcher", "w") as out:
        child = subprocess.Popen(
            ["sh", "-c", f"({node}) & wait"], stdout=out, start_new_session=True
        )
    try:
        memory = {}
        for _ in range(100):  # until the child has started (its fd 1 is the file)
            memory = node_memory(str(tmp_path))
            if memory:
                break
            time.sleep(0.1)
        assert list(memory) == ["actor/0"]
        node = memory["actor/0"]
        assert 0 < node["uss_gb"] <= node["rss_gb"] <= node["hwm_gb"]
        summary = stages.summarize_memory(memory)
        assert summary["actor"] == node and summary["total"]["count"] == 1
    finally:
        os.killpg(child.pid, signal.SIGKILL)  # the grandchild too
        child.wait()


class _Handle:
    """A Launchpad handle's one method, over a client object."""

    def __init__(self, client):
        self._client = client

    def dereference(self):
        return self._client


class _Counts:
    """A counter and a Reverb client whose answers a test scripts by time: `get_counts`
    raises (unanswered) until `answers_after` s and then counts one learner step a call."""

    def __init__(self, answers_after: float):
        self._start, self._after, self._steps = time.time(), answers_after, 0

    def get_counts(self):
        if time.time() - self._start < self._after:
            raise TimeoutError("the counter is starved")
        self._steps += 1
        return {"learner_steps": self._steps, "counter_seconds": 1.0}

    def server_info(self, timeout):
        raise AssertionError("table_counts is replaced in this test")


@pytest.mark.parametrize("answers_after,stretched", [(0.0, False), (0.9, True), (99.0, True)])
def test_a_window_stretches_until_its_count_moved_twice(monkeypatch, answers_after, stretched):
    """A window whose counter went unanswered (a starved machine) runs on until the
    timed count has changed twice, at most STRETCH windows; an answered one ends on time."""
    monkeypatch.setattr(
        "benchmarks.tables.table_counts", lambda client: {"inserts": 1, "samples": 0, "size": 1}
    )
    client = _Counts(answers_after)
    monitor = Monitor(_Handle(client), {"main": _Handle(client)}, gate_dir="")
    monitor.phase = {"wait_for": ["learner_steps"]}
    window, start = 0.5, time.time()
    snapshots = monitor._record(window, "main")
    took = time.time() - start
    steps = [s["learner_steps"] for s in snapshots]
    assert took < window * STRETCH + 0.5
    if answers_after < window * STRETCH:
        assert len(set(steps)) >= 3 and took >= max(window, answers_after), (steps, took)
    else:
        assert steps == [] and took >= window * STRETCH
    assert (took > window + 0.3) == stretched, took


@pytest.mark.parametrize(
    "bad,message",
    [
        ("--config.actor.nope=3", "config.actor.nope is unknown (in --config.actor.nope)"),
        ("--config.actor.num_envs", "Missing value for flag --config.actor.num_envs"),
        ("--config.actor.num_envs=many", "--config.actor.num_envs=many: invalid literal"),
        (
            "--a2c.actor.num_envs=8",
            # Every config the bench runs, in its order, as its own override prefix.
            "".join(f", --{name}.<field>" for name in rows.CONFIGS) + " for one",
        ),
        ("--set=actor.num_envs=8", "Unknown command line flag 'set'"),
        # A valid field whose value the DQN config cannot take with the base sizes.
        ("--config.replay.item_steps=4", "config.replay.min_size=640 transitions; need a"),
        ("--dqn.replay.item_steps=4", "config.replay.min_size=640 transitions; need a"),
    ],
)
def test_a_bad_override_exits_2_in_one_line_before_anything_is_written(
    tmp_path, capsys, bad, message
):
    out = tmp_path / "bench"
    with pytest.raises(SystemExit) as exited:
        run.main(["--only=ceilings", f"--out={out}", bad])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and err.count("\n") == 1 and message in err, err
    assert not out.exists()


def test_an_algorithms_own_override_reaches_its_runs_alone(tmp_path, monkeypatch):
    """`--dqn.` changes DQN's configs only, in the bench and in the stage program it
    starts (whose flags `Bench._program` builds), over `--config.`'s."""
    args = ["--dqn.actor.num_envs=8", "--config.actor.num_envs=16", "--ppo.agent.num_epochs=2"]
    benches = []
    monkeypatch.setattr(run, "run_sections", lambda bench, names: benches.append(bench))
    monkeypatch.setattr(run, "publish", lambda results, run_dir: "")
    assert run.main(["--only=stages", f"--out={tmp_path}", *args]) == 0
    (bench,) = benches
    assert bench.overrides("dqn") == {"actor.num_envs": 8}
    assert bench.overrides("ppo") == {"actor.num_envs": 16, "agent.num_epochs": 2}
    commands = []
    ran = {"wall": 0.0, "rc": 0, "log": ""}
    monkeypatch.setattr(run, "run_subprocess", lambda cmd, **_: commands.append(cmd) or ran)
    monkeypatch.setattr(run, "read_json", lambda path: None)
    bench._program("stage", rows.ALGOS, 1)
    (command,) = commands
    built = {}
    monkeypatch.setattr(stages, "stage_program", lambda configs, *_: built.update(configs) or ())
    monkeypatch.setattr(stages, "launch_and_measure", lambda *_: None)
    stages.main(command[command.index("benchmarks.stages") + 1 :])
    assert (built["dqn"].actor.num_envs, built["ppo"].actor.num_envs) == (8, 16)
    assert built["ppo"].agent.num_epochs == 2 and "num_epochs" not in built["dqn"].agent


def test_e2e_data_age_is_the_windows_age_per_item_learned():
    config = type("C", (), {"num_actors": 2})()
    snaps = [
        dict(time=0.0, learner_items=100, data_age_sum=1000.0, data_age_max=9),
        dict(time=1.0, learner_items=140, data_age_sum=1100.0, data_age_max=12),
    ]
    out = stages.summarize_e2e({"snapshots": snaps}, config)
    assert (out["data_age_mean"], out["data_age_max"]) == (2.5, 12)  # 100 / 40 items
    by_name = {r.name: r for r in rows.build_rows({"e2e": {"dqn": out}})}
    assert "data age 2.5 (max 12)" in by_name["dqn 2 actors, SPI 1: env steps/s"].note
    nothing = stages.summarize_e2e({"snapshots": snaps[:1] * 2}, config)
    assert nothing["data_age_mean"] is None  # no item learned in the window


def test_stage_actor_on_fixed_params_runs_ungated():
    """The stage program's actor gets params that never advance: its config drops the
    version gate (PPO's gated config with one actor fails validation otherwise)."""
    config = stages.bench_config("ppo", num_actors=1, fixed_params=True)
    assert config.actor.chunks_per_version == 0
    with pytest.raises(ConfigError):
        stages.bench_config("ppo", num_actors=1)
    assert stages.bench_config("ppo", num_actors=2).actor.chunks_per_version == 1  # e2e: gated


def test_stability_takes_the_second_half_and_the_final_policy(tmp_path):
    from benchmarks import stability

    history = [(100, 1.0, 0.1), (200, 2.0, 0.89), (300, 3.0, 0.84), (400, 4.0, 0.88)]
    row = stability.second_half(history, 400, 0.89)
    shares = (0.84 / 0.89, 0.88 / 0.89)  # the calls past 200 env steps: 94% < 95%
    assert row == dict(
        min=round(shares[0], 4),
        mean=round(sum(shares) / 2, 4),
        final=round(shares[1], 4),
        points=2,
        ok=False,
    )
    assert stability.second_half(history[:2], 200, 0.89)["ok"]  # 1.0 and 1.0
    logs = tmp_path / "logs"
    logs.mkdir()
    lines = ["elapsed,env_steps,exact_success,optimal_success", "1.0,100,,", "2.0,200,0.89,0.89"]
    lines += ["3.0,300,0.84,0.89", "4.0,400,0.88,0.89"]  # a row without exact figures is skipped
    (logs / "evaluator.csv").write_text("\n".join(lines) + "\n")
    from_csv = stability.from_run_dir(str(tmp_path), 400)
    assert {k: from_csv[k] for k in row} == row
    assert from_csv["curve"] == [(200, 0.89), (300, 0.84), (400, 0.88)]


def test_stability_judges_a_return_env_by_its_evaluations_mean_return(tmp_path):
    """A preset with a return target (issue 37 item 5): a real short single-process run
    with the target off gives one point per routine evaluation (every 8,192 env steps),
    judged against the preset's 475; a distributed run's log by --target_return."""
    from benchmarks import stability

    out = tmp_path / "rows.jsonl"
    [row] = stability.main(
        ["--configs=ppo_cartpole", "--seeds=1", "--env_steps=32768", f"--out={out}"]
    )
    assert row["target_return"] == 475.0 and row["env_steps"] == 32768
    assert [steps for steps, _ in row["curve"]] == [8192, 16384, 24576, 32768]
    late = [r / 475.0 for _, r in row["curve"][2:]]
    assert row["points"] == 2 and row["mean"] == round(sum(late) / 2, 4)
    assert row["ok"] == (row["mean"] >= stability.GOAL_RETURN_MEAN)
    assert json.loads(out.read_text())["curve"] == [list(p) for p in row["curve"]]

    evaluations = [(100, 1.0, 50.0), (200, 2.0, 500.0), (300, 3.0, 400.0), (400, 4.0, 470.0)]
    held = stability.second_half_return(evaluations, 400, 475.0)
    assert held == dict(min=0.8421, mean=0.9158, final=0.9895, points=2, ok=True)
    assert not stability.second_half_return(evaluations[:3], 400, 475.0)["ok"]  # 400: 84%
    logs = tmp_path / "logs"
    logs.mkdir()
    lines = ["elapsed,env_steps,mean_return"] + [f"{s},{n},{r}" for n, s, r in evaluations]
    (logs / "evaluator.csv").write_text("\n".join(lines) + "\n")
    from_csv = stability.from_run_dir(str(tmp_path), 400, target_return=475.0)
    assert {k: from_csv[k] for k in held} == held


def test_falls_ranks_the_learners_metrics_before_each_fall(tmp_path, capsys):
    """benchmarks.falls on a run's logs: a fall is the first evaluation of a row below
    `drop` x the mean of the `window` before; the learner's peak between the evaluation
    before it and the fall is ranked among all its rows, beside chance."""
    from benchmarks import falls

    values = np.array([10, 10, 10, 10, 4, 3, 9, 10, 10, 10, 10, 2.0])
    assert falls.fall_indices(values, 0.5, 4) == [4, 11]  # 5 continues the fall at 4
    assert falls.fall_indices(values, 0.3, 4) == [11]
    assert falls.rank(np.array([1.0, 2.0, 3.0, 4.0]), 3.0) == 0.75
    assert falls.chance_rank(np.array([1.0, 2.0, 3.0, 4.0]), 2) == 0.75  # peaks 2, 3, 4
    logs = tmp_path / "logs"
    logs.mkdir()
    evaluated = ["env_steps,param_version,mean_return"]
    evaluated += [f"{i * 100},{i * 2},{v}" for i, v in enumerate(values)]
    (logs / "evaluator.csv").write_text("\n".join(evaluated) + "\n")
    kl = np.full(23, 0.01)
    kl[6], kl[20] = 0.05, 0.04  # updates 7 and 21: after the evaluation before each fall
    learned = ["param_version,approx_kl"] + [f"{u + 1},{k}" for u, k in enumerate(kl)]
    (logs / "learner.csv").write_text("\n".join(learned) + "\n")
    summaries = falls.main([f"--run_dirs={tmp_path}", "--metrics=approx_kl"])
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["env_steps"], r["versions"]) for r in rows[:2]] == [(400, [6, 8]), (1100, [20, 22])]
    assert [r["ranks"]["approx_kl"] for r in rows[:2]] == [1.0, round(22 / 23, 3)]
    assert summaries == [rows[2]] and rows[2]["falls"] == 2
    assert abs(rows[2]["ranks"]["approx_kl"] - (1.0 + 22 / 23) / 2) < 1e-3
    assert 0 < rows[2]["chance"]["approx_kl"] < rows[2]["ranks"]["approx_kl"]


def test_falls_refuses_bad_input_in_one_line(tmp_path, warm_python):
    # `python -m benchmarks.falls`, forked from the suite's warm interpreter: its output
    # (stdout and stderr together) is the one line
    for args in (["--drop=1.5", f"--run_dirs={tmp_path}"], [], [f"--run_dirs={tmp_path}"]):
        code, out, _ = warm_python.run("benchmarks.falls", *args)
        assert code == 2 and len(out.strip().splitlines()) == 1, out


def test_the_study_runs_its_parts_through_compare_and_gathers_their_tables(tmp_path):
    """`benchmarks.study` (issue 30 item 5's one command), its `fixed` part at a tiny
    budget on real runs (test_mt): compare.py's summary table and, per run, whether
    the last and the second-half policies stayed learned."""
    from benchmarks import study

    flags = ["--configs=ppo_slippery8x8", "--seeds=3", "--parts=fixed", f"--out={tmp_path}"]
    flags += ["--fixed_env_steps=8192", "--config.evaluator.every_env_steps=2048"]
    flags += ["--config.evaluator.num_envs=10", "--launch_type=test_mt"]
    assert study.main(flags) == 0
    text = (tmp_path / "study.md").read_text()
    assert "## Slippery 8x8, a fixed budget with the target off: the last policy" in text
    table = study.summary_table(str(tmp_path / "fixed" / "report.md"))
    assert table in text and "| ppo_slippery8x8 |" in table
    (verdict,) = [line for line in text.splitlines() if line.startswith("| ppo_slippery8x8 | 3 |")]
    assert verdict.endswith("| no |")  # 8k env steps learn nothing here
    with pytest.raises(SystemExit) as exit_:
        study.main(["--parts=slippery,bogus", f"--out={tmp_path}"])
    assert exit_.value.code == 2


def test_the_studys_continuous_parts_compare_returns_at_equal_env_steps_and_seconds(tmp_path):
    """The Pendulum and HalfCheetah parts (issue 36 item 6): each config's budget is the
    same env steps (or wall seconds, each part's own flag) with the target off, no
    gridworld map; their table gives the return reached at a quarter, half and all of
    it, mean [min-max] over seeds, from the evaluator's rows (seconds counted from
    compare's training origin)."""
    from benchmarks import study

    args = study._flags()
    args(["study", "--seeds=1,2", f"--out={tmp_path}", "--continuous_seconds=100"])
    steps = study.compare_command("pendulum_steps", args, [])
    assert "--env_steps=100000" in steps and "--seconds=0" in steps and "--map=8x8" not in steps
    assert "--configs=sac_pendulum,td3_pendulum,ppo_pendulum" in steps
    seconds = study.compare_command("pendulum_seconds", args, [])
    assert "--env_steps=0" in seconds and "--seconds=100" in seconds
    assert "--map=8x8" in study.compare_command("fixed", args, [])
    assert "--env_steps=4000000" in study.compare_command("fixed", args, [])
    args(["study", "--halfcheetah_env_steps=30000", "--halfcheetah_seconds=240"])
    cheetah = study.compare_command("halfcheetah_steps", args, [])
    assert "--configs=sac_mujoco,td3_mujoco,ppo_mujoco" in cheetah and "--map=8x8" not in cheetah
    assert "--env_steps=30000" in cheetah and "--seconds=0" in cheetah
    assert "--target_return=1000" in cheetah and "--config.evaluator.keep_best=False" in cheetah
    cheetah = study.compare_command("halfcheetah_seconds", args, [])
    assert "--env_steps=0" in cheetah and "--seconds=240" in cheetah
    header = "step,elapsed,env_steps,mean_return"
    # elapsed 5 s at env step 0 is the origin: training seconds are elapsed - 5.
    rows = {1: ["0,5,0,-1200", "1,30,40000,-600", "2,60,80000,-300"], 2: ["0,5,0,-1000"]}
    for seed, lines in rows.items():
        logs = tmp_path / "pendulum_seconds" / "sac_pendulum" / f"seed{seed}" / "logs"
        logs.mkdir(parents=True)
        (logs / "evaluator.csv").write_text("\n".join([header, *lines]) + "\n")
    table = study.returns_at_equal_budget("pendulum_seconds", args).splitlines()
    assert table[0] == "| config | return at 25 s | return at 50 s | return at 100 s |"
    # seed 1: -600 at 25 s (elapsed 30) and still at 50 s, -300 from 55 s; seed 2: its only row.
    cells = ["-800.00 [-1000.00–-600.00]"] * 2 + ["-650.00 [-1000.00–-300.00]"]
    assert table[2] == "| sac_pendulum | " + " | ".join(cells) + " |"
    assert table[3] == "| td3_pendulum | no runs | no runs | no runs |"
    (logs := tmp_path / "halfcheetah_steps" / "ppo_mujoco" / "seed1" / "logs").mkdir(parents=True)
    (logs / "evaluator.csv").write_text(f"{header}\n0,5,0,-300\n1,9,20480,450\n")
    table = study.returns_at_equal_budget("halfcheetah_steps", args).splitlines()
    assert table[0] == (
        "| config | return at 7,500 env steps | return at 15,000 env steps "
        "| return at 30,000 env steps |"
    )
    assert table[4] == "| ppo_mujoco | -300.00 | -300.00 | 450.00 |"  # one seed: no spread


def test_minatar_rows_divide_each_stage_by_its_own_ceiling():
    """Section `minatar` (issue 37): the trainer against the fused loop, each actor's
    rollout against its scan, PPO's update against the fused update; a row whose part did
    not run says so."""
    results = {
        "minatar": {
            "trainer": {
                "local": {"env_steps_per_s": 900.0},
                "local_no_eval": {"env_steps_per_s": 1000.0},
                "fused": {"env_steps_per_s": 1000.0},
            },
            "actors": {
                "ppo_breakout": {
                    "shape": "[128, 32]",
                    "rollout": {"env_steps_per_s": 30.0},
                    "actor_compute": {"env_steps_per_s": 25.0},
                    "scan": {"env_steps_per_s": 40.0},
                },
            },
            "updates": {"ppo_breakout": {"agent_updates_per_s": 1.0, "fused_updates_per_s": 2.0}},
            "distributed": {"env_steps_per_s": 600.0, "updates_per_s": 0.1, "wait_share": 0.2},
        }
    }
    by_name = {r.name: r for r in rows.build_rows(results) if r.section == "6 minatar"}
    (program,) = [r for r in by_name.values() if "distributed program" in r.name]
    assert (program.ratio, program.ceiling_name, program.status) == (0.6, "fused loop", "PASS")
    assert "learner waits 20%" in program.note
    (trainer,) = [r for r in by_name.values() if "single-process trainer" in r.name]
    assert (trainer.ratio, trainer.status) == (0.9, "PASS")
    assert "1k env steps/s" in trainer.note  # without its evaluations
    ppo = by_name[
        "ppo_breakout actor rollout [128, 32] against a jitted scan of gymnax's step "
        "and the same network and policy"
    ]
    assert (ppo.ratio, ppo.ceiling_name, ppo.status) == (0.75, "scan", "MISS")
    (update,) = [r for r in by_name.values() if r.name.startswith("ppo_breakout PPO update")]
    assert (update.ratio, update.status) == (0.5, "MISS")
    dqn = [r for r in by_name.values() if r.name.startswith("dqn_breakout actor rollout")]
    assert dqn[0].figure is None and dqn[0].note == "not run"


def test_the_minatar_trainer_row_calls_distrl_local_as_it_runs():
    """The section's trainer figure: distrl.local's compiled call at a tiny size, each
    call TRAINER_ITERATIONS iterations of T x B env steps (`local._train_call` takes the
    call's length, as `distrl.local` passes it)."""
    from benchmarks import trainer
    from benchmarks.common import load_config
    from distrl import local

    config = load_config("ppo_breakout", {"actor.num_envs": 4, "actor.unroll_length": 8})
    # the actors' envs, in one batch
    envs_at_once = local.Settings.of(experiment_lib.make(config)).num_envs
    call = trainer.local_call(config, 0)
    first = int(call())
    assert envs_at_once == config.num_actors * 4
    assert int(call()) - first == trainer.TRAINER_ITERATIONS * 8 * envs_at_once


@pytest.mark.parametrize("torso", ["mlp", "conv"])
def test_the_fused_ceiling_trains_and_counts_its_env_steps(torso):
    """benchmarks/fused_ppo.py at a tiny size: each call runs its iterations of T x B env
    steps and finishes episodes; the network is the config's (the preset's MLP, or a
    conv torso, im2col, where the config asks for one)."""
    from benchmarks import fused_ppo
    from benchmarks.common import load_config

    sizes = {"actor.num_envs": 4, "actor.unroll_length": 8, "agent.torso": torso}
    config = load_config("ppo_breakout", sizes)
    init, call, steps = fused_ppo.make_call(config, 2)
    assert steps == 2 * 8 * 2 * 4  # iterations x T x num_actors x num_envs
    carry = init(jax.random.PRNGKey(0))
    assert ("policy_torso_conv_0" in carry.params) == (torso == "conv")
    assert "policy_torso_1" in carry.params  # the preset's two hidden layers of 256
    before = jax.tree.map(np.asarray, carry.params)
    carry, (ended, returns) = call(carry)
    assert ended.shape == (2,) and returns.shape == (2,)
    changed = jax.tree.map(lambda a, b: not np.array_equal(a, b), before, carry.params)
    assert all(jax.tree.leaves(changed))  # every parameter took Adam steps


def test_every_standard_suite_names_a_config_that_runs_on_its_env():
    """benchmarks/suites.py: each suite's config loads with its overrides and validates,
    its env is the one the config names, each runs in one process too (no warm-up
    rollout an env stepped in Python cannot give), and the protocol's settings leave no
    target on."""
    from benchmarks import suite_results, suites  # noqa: PLC0415

    assert len(suites.BY_NAME) == len(suites.SUITES)
    for suite in suites.SUITES:
        config, target = suite_results.prepare(suite, 51, suite.budget, {})
        env = config.env.map if config.env.name == "gridworld" else config.env.name
        assert suite.env.split(" ")[0] == env, (suite.name, env)
        ev = config.evaluator
        assert (ev.target_return, ev.target_success, ev.target_of_optimal) == (0, 0, 0)
        assert not ev.keep_best and config.budget.env_steps == suite.budget > 0
        assert config.budget.seconds == 0 and config.seed == 51
        assert suite.exact == (target is not None and target[0] == "exact_ratio"), suite.name
        local.Settings.of(experiment_lib.make(config))  # no ConfigError: single mode runs
        assert suite.published == "—" or suite.source, suite.name  # a figure cites its source


def _rates(**kw):
    from benchmarks.capacity import Rates

    base = dict(actor_per_core=1000.0, insert_per_core=1e6, sample_per_core=1e6)
    return Rates(**{**base, "samples_per_step": 1.0, **kw})


def test_capacity_model_names_each_stage_that_bounds_once():
    """Hand-computed cases of benchmarks/capacity.py, each stage the bound once."""
    from benchmarks.capacity import SERVER_CORES, Learner, predict

    cpu = Learner("CPU learner", host_per_core=1000.0, host_cores=1.0)
    # actors: 1 actor makes 100; 2 actors run out of the host's 2 cores, which the
    # learner's and the server's work per env step share: 2 / (1/100 + 3/1000)
    rates = _rates(actor_per_core=100.0, insert_per_core=1000.0, sample_per_core=1000.0)
    one, two = predict(rates, cpu, 2, 1), predict(rates, cpu, 2, 2)
    assert (one.env_steps_per_s, one.bottleneck, one.learner_busy) == (100.0, "actors", 0.1)
    assert two.bottleneck == "actors" and math.isclose(two.env_steps_per_s, 2 / 0.013)
    # Reverb insert: the server's cores over its insert and sample cost per env step
    device = Learner("TPU", host_per_core=1e6, host_cores=1.0, device_samples_per_s=1e6)
    rates = _rates(insert_per_core=100.0, sample_per_core=10_000.0)
    p = predict(rates, device, 64, 1)
    assert p.bottleneck == "Reverb insert"
    assert math.isclose(p.env_steps_per_s, SERVER_CORES / (1 / 100 + 1 / 10_000))
    # Reverb sample: 4 samples per env step at 100 per server core
    rates = _rates(insert_per_core=10_000.0, sample_per_core=100.0, samples_per_step=4.0)
    p = predict(rates, device, 64, 1)
    assert p.bottleneck == "Reverb sample"
    assert math.isclose(p.env_steps_per_s, SERVER_CORES / (1 / 10_000 + 4 / 100))
    # the learner: a device of 3,000 samples/s at 2 samples per env step learns from 1,500
    tpu = Learner("TPU", host_per_core=1e6, host_cores=1.0, device_samples_per_s=3000.0)
    p = predict(_rates(samples_per_step=2.0), tpu, 16, 2)
    assert (p.env_steps_per_s, p.bottleneck, p.learner_busy) == (1500.0, "learner", 1.0)
    assert tpu.limit == "device" and cpu.limit == "CPU"
    slow_host = Learner("TPU", host_per_core=1000.0, host_cores=1.0, device_samples_per_s=3000.0)
    assert (slow_host.samples_per_s, slow_host.limit) == (1000.0, "host work")


def test_capacity_model_of_gated_actors_takes_turns_with_the_learner():
    """On-policy with the version gate: the act phase (A) and the learn phase (B) take
    turns, 1 / (1/A + 1/B); a host saturates at the fewest actors within 5% of its best."""
    from benchmarks.capacity import Learner, predict, saturation

    learner = Learner("CPU learner", host_per_core=500.0, host_cores=2.0)  # 1,000 samples/s
    rates = _rates(gated=True, insert_per_core=1e12, sample_per_core=1e12)
    one, three = predict(rates, learner, 8, 1), predict(rates, learner, 8, 3)
    assert (one.env_steps_per_s, one.bottleneck, one.learner_busy) == (500.0, "learner", 0.5)
    assert math.isclose(three.env_steps_per_s, 750.0) and math.isclose(three.learner_busy, 0.75)
    # 8 actors: 1 / (1/8000 + 1/1000) = 889 at best; 6 actors reach 857 >= 95% of it
    s = saturation(rates, learner, 8)
    assert s.best.actors == 8 and math.isclose(s.best.env_steps_per_s, 8000 / 9, rel_tol=1e-6)
    assert s.at.actors == 6 and s.best.bottleneck == "learner"
    # each round of 1,000 env steps waits 0.5 s more for the new params: 1 actor's
    # round takes 1 s acting, 1 s learning and the trip, 1000 / 2.5 = 400
    tripped = _rates(gated=True, insert_per_core=1e12, sample_per_core=1e12, round_steps=1000)
    tripped = dataclasses.replace(tripped, round_trip_s=0.5)
    assert math.isclose(predict(tripped, learner, 8, 1).env_steps_per_s, 400.0)
    # a counter's cores per actor leave the actors fewer: 2 cores, 0.5 per actor
    served = _rates(actor_per_core=100.0, service_per_actor=0.5)
    p = predict(served, Learner("CPU learner", 1e6, 1.0), 2, 2)
    assert p.bottleneck == "actors" and math.isclose(p.env_steps_per_s, 1 / (1 / 100 + 3e-6))


def test_capacity_table_and_check_rows_from_measured_inputs(tmp_path):
    """The section's arithmetic on a run's figures: the rates per core from the stage
    program's windows, an accelerator row of learner_devices.csv, a check's prediction
    beside its measured program, its table row within 25% and its results CSV row."""
    from benchmarks import capacity_bench

    inputs = {
        "actor": {
            "env_steps_per_s": 400_000.0,
            "transitions_to_reverb_per_s": 400_000.0,
            "cores": {"actor/0": 1.0, "replay/0": 0.4, "counter/0": 0.1},
        },
        "learner": {"samples_per_s": 300_000.0, "cores": {"learner/0": 1.2, "replay/0": 0.1}},
        "reverb": {"read_samples_per_cpu_s": 500_000.0},
        "samples_per_step": 4.0,
        "gated": False,
    }
    rates = capacity_bench.rates_of(inputs)
    assert (rates.actor_per_core, rates.insert_per_core) == (400_000.0, 1e6)
    assert (rates.sample_per_core, rates.service_per_actor) == (3e6, 0.1)
    learner = capacity_bench.cpu_learner(inputs)
    assert (learner.host_per_core, learner.host_cores) == (250_000.0, 1.2)
    assert capacity_bench.host_work_per_core(inputs) == 500_000.0  # the read ceiling's
    devices = tmp_path / "learner_devices.csv"
    # the device's best K fed from the host (as the learner node is), where measured
    devices.write_text(
        "preset,figure,batch,updates_per_call,samples_per_s,platform,device\n"
        "dqn,resident,[256],1,2000000,cpu,cpu\ndqn,resident,[256],8,9000000,tpu,TPU v5 lite\n"
        "dqn,fed,[256],1,1000000,tpu,TPU v5 lite\ndqn,fed,[256],8,2500000,tpu,TPU v5 lite\n"
        'ppo,resident,"[16, 128]",1,5,tpu,TPU v5 lite\n'
    )
    (tpu,) = capacity_bench.device_learners(capacity_bench.read_devices(devices), "dqn", inputs)
    assert (tpu.name, tpu.device_samples_per_s, tpu.host_cores) == ("TPU v5 lite", 2.5e6, 1.0)
    assert tpu.samples_per_s == 500_000.0 and tpu.limit == "host work"  # one core's reading
    # the program used 1.9 cores while the machine was busy 2.3: other work took 0.4 of 2
    e2e = {"env_steps_per_s": 70_000.0, "updates_per_s": 1100.0, "cores_total": 1.9}
    e2e.update(machine_cores=2.3, cores_text="learner/0 1.2, ...")
    check = {"preset": "dqn", "actors": 1, "shape": (4.0, False), "overrides": {}, "e2e": e2e}
    check["round_steps"] = None  # not gated
    out = {"inputs": {"dqn": inputs}, "checks": {"dqn-1": check}}
    capacity_bench.predict_checks(out, 2)
    # 1.6 cores less the counter's 0.1 over 20.83 us of work per env step: 72k, below the
    # learner's 300k / 4 = 75k, which all of the host's 2 cores would reach
    assert math.isclose(check["predicted"], 72_000.0) and check["bottleneck"] == "actors"
    assert check["host"].startswith("1.60 of 2 cores") and check["all_cores"] == "75k (1.07x)"
    row = capacity_bench.judged(check)
    assert math.isclose(row.ratio, 72 / 70) and row.status == "PASS"
    text = capacity_bench.summary(out, capacity_bench.read_devices(devices))
    assert (
        "| 208 | TPU v5 lite |" in text and "for 1.60 of 2 cores: 72k (actors), 1.03x PASS" in text
    )
    assert "for 2 cores: 75k (learner), 1.07x PASS" in text
    results = {"meta": {"load_average": {"capacity": (1.0, 1.0, 1.0)}}, "capacity": out}
    written = capacity_bench.record(results, "s", "abc1234", "cmd", tmp_path / "c.csv")
    assert [(r["cores"], r["ratio"], r["holds"]) for r in written] == [
        ("1.60 of 2", "1.03", "PASS"),
        ("2", "1.07", "PASS"),
    ]


# About 30-60 s on the shared 2-core machine: a fresh interpreter imports JAX and compiles.
def test_accelerator_rows_come_from_a_host_without_reverb_launchpad_or_tensorflow(tmp_path):
    """`accelerator.py` on a host with only the core's packages (a TPU host): the data
    path's packages made unimportable, a replay and an on-policy preset's updates are
    timed (K per call and fed from the host for the replay one), `--trace` profiles each
    case's calls, and `--rows` turns them into learner_devices.csv rows naming the
    platform, device kind and commit given."""
    measured, out, trace = tmp_path / "cpu.json", tmp_path / "devices.csv", tmp_path / "trace"
    code = (
        "import importlib.abc, sys\n"
        "class Block(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('tensorflow', 'reverb', 'launchpad', 'courier'):\n"
        "            raise ImportError('blocked: ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "from absl import app\n"
        "from benchmarks import accelerator\n"
        "sys.argv = ['x', '--cases=dqn,ppo', '--seconds=0.05', '--k=2',\n"
        f"            '--out={measured}', '--trace={trace}']\n"
        "app.run(accelerator.main)\n"
    )
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", JAX_PLATFORMS="cpu")
    root = benchmarks.__path__[0] + "/.."
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, env=env, timeout=600
    )
    assert done.returncode == 0, done.stderr[-2000:]
    for case in ("dqn", "ppo"):  # one profile each, in XProf's format
        assert len(list((trace / case).glob("plugins/profile/*/*.xplane.pb"))) == 1, case
    rows_cmd = [
        sys.executable, "-m", "benchmarks.accelerator",
        f"--rows={measured}", f"--csv={out}", "--commit=abc1234",
    ]  # fmt: skip
    assert subprocess.run(rows_cmd, cwd=root, env=env, timeout=300).returncode == 0
    import csv  # noqa: PLC0415

    with open(out) as f:
        written = list(csv.DictReader(f))
    assert [(r["preset"], r["figure"], r["updates_per_call"]) for r in written] == [
        ("dqn", "resident", "1"), ("dqn", "fed", "1"), ("dqn", "resident", "2"),
        ("dqn", "fed", "2"), ("ppo", "resident", "1"), ("ppo", "fed", "1"),
        ("dqn_td[4096]", "td_gather", "1"), ("dqn_td[4096]", "td_one_hot", "1"),
    ]  # fmt: skip
    for row in written:
        assert (row["platform"], row["device"], row["commit"]) == ("cpu", "cpu", "abc1234"), row
        assert float(row["samples_per_s"]) > 0
        assert row["command"].startswith("python -m benchmarks.accelerator --cases=dqn,ppo")
    assert written[0]["batch"] == "[256]" and written[4]["batch"] == "[16, 128]"


def test_parity_trains_both_programs_alike_and_plays_their_last_policies_alike():
    """benchmarks/parity.py at a tiny size: distrl.local and the fused loop train from
    one seed for the same whole iterations, and one evaluation (evaluator.confirm_envs
    sampled episodes) plays each last policy; the summary gives each program's seeds."""
    from benchmarks import parity
    from benchmarks.common import load_config

    sizes = {"actor.num_envs": 4, "actor.unroll_length": 8, "evaluator.confirm_envs": 20}
    config = load_config("ppo_breakout", sizes)
    assert parity.iterations_for(config, 1000) == 16  # 64 env steps an iteration: [8, 2 x 4]
    rows = parity.run_seed(config, 3, 8 * 64)
    assert [r["program"] for r in rows] == list(parity.PROGRAMS)
    for row in rows:
        assert row["seed"] == 3 and row["env_steps"] == 512 and row["episodes"] == 20, row
        assert row["return_low"] <= row["mean_return"] <= row["return_high"], row
    text = parity.summary(rows + [dict(r, seed=4) for r in rows])
    assert text.count("over 2 seeds") == 2, text
