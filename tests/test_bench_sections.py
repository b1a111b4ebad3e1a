"""The benchmark sections that run real work, each at a tiny size: the ceilings, the
host env, distrl.local, the recurrent presets' rows and the capacity model's inputs and
check measure real numbers into their rows (apart from tests/test_benchmarks.py so
that pytest-xdist's file-per-worker can run them beside it)."""

import json
import os

import pytest

from benchmarks import rows, run

# Each starts processes (a Reverb server, stage programs, distrl.local as a user): `slow`,
# so that the file, the suite's longest, starts first (tests/conftest.py).
pytestmark = pytest.mark.slow


# Not `slow`: 20-29 s measured on the shared 2-core machine at load 6-8 (14 s of CPU for
# the whole file, most of it compiling and the Reverb server process importing TensorFlow).
def test_ceilings_section_measures_every_ceiling_row(tmp_path, monkeypatch):
    monkeypatch.setitem(run.SETTINGS["quick"], "ceiling_s", 0.05)
    tiny = ["--config.actor.num_envs=8", "--config.actor.unroll_length=4"]
    assert run.main(["--quick", "--only=ceilings", f"--out={tmp_path}", *tiny]) == 0
    with open(tmp_path / "bench.json") as f:
        results = json.load(f)
    assert "errors" not in results
    ceiling_rows = [r for r in results["rows"] if r["section"] == "1 ceilings"]
    assert len(ceiling_rows) == 5 * len(rows.ALGOS) + 2 * len(rows.ENV_PRESETS) + len(rows.LEARNERS)
    for row in ceiling_rows:
        assert row["figure"] > 0, row
    compute = [r for r in ceiling_rows if "actor compute" in r["name"]]
    for row in compute:  # a ratio against the rollout, judged against issue 14's goal
        assert row["ratio"] == row["figure"] / row["ceiling"]
        assert row["status"] == ("PASS" if row["ratio"] >= 0.8 else "MISS")
    assert "[4, 8]" in ceiling_rows[0]["name"]  # the overridden sizes were used
    table = (tmp_path / "bench.md").read_text()
    assert all(r["name"] in table for r in results["rows"])


# 95-117 s on the shared 2-core machine at load 11-21 (13 s of CPU): the section's process,
# 4 subprocess copies and one actor process each import and compile.
def test_host_section_measures_the_host_stepped_actor_against_the_env_alone(tmp_path, monkeypatch):
    """In a process set up as an actor node (synchronous dispatch, one XLA thread,
    threefry straight-line): the actors against the vector env alone, sync against
    subprocess copies, and (here 1 only) actor processes at once with the cores each
    used."""
    monkeypatch.setitem(run.SETTINGS["quick"], "window", 0.4)
    monkeypatch.setattr(rows, "HOST_TOGETHER", (1,))
    assert run.main(["--quick", "--only=host", f"--out={tmp_path}"]) == 0
    with open(tmp_path / "bench.json") as f:
        results = json.load(f)
    assert "errors" not in results
    host = results["host"]
    assert host["meta"]["synchronous_dispatch"] is True
    assert host["meta"]["unrolled_threefry"] is True  # the policy call in the calling thread
    assert "--xla_cpu_multi_thread_eigen=false" in host["meta"]["xla_flags"]
    host_rows = [r for r in results["rows"] if r["section"] == "1 host env"]
    alone, actors = host_rows[0], host_rows[1 : 1 + len(rows.ALGOS)]
    assert alone["figure"] > 0 and "gymnasium's own SyncVectorEnv" in alone["note"]
    for row in actors:  # each actor against the same vector env alone
        assert row["figure"] > 0 and row["ceiling"] == alone["figure"], row
        assert row["status"] == ("PASS" if row["ratio"] >= 0.7 else "MISS")
    cpu_rows = host_rows[1 + len(rows.ALGOS) : 1 + 2 * len(rows.ALGOS)]
    for row in cpu_rows:  # the same ratio in CPU time: env steps per CPU second
        assert "CPU time" in row["name"] and row["figure"] > 0 and row["ceiling"] > 0, row
        assert row["status"] == ("PASS" if row["ratio"] >= 0.7 else "MISS")
    sync, asynchronous, sync_actor, async_actor = host_rows[5:9]
    assert asynchronous["ceiling"] == sync["figure"] > 0 and asynchronous["figure"] > 0
    assert sync_actor["ceiling"] == sync["figure"] and sync_actor["figure"] > 0
    assert async_actor["ceiling"] == asynchronous["figure"] and async_actor["figure"] > 0
    one, *more = host_rows[9:12]
    assert one["name"].startswith("1 dqn host-stepped actor process at once") and one["figure"] > 0
    cores = host["together"]["1"]["cores"]
    assert len(cores) == 1 and 0 < cores[0] <= 1.5 and f"{cores[0]:.2f}" in one["note"]
    assert [r["figure"] for r in more] == [None] * len(more)  # 2 and 4: not run here
    # MuJoCo's HalfCheetah-v5 (Box actions): SAC's host actor against its env alone
    env, actor, cpu = host_rows[12:15]
    assert "HalfCheetah-v5 (MuJoCo)" in env["name"] and env["figure"] > 0, env
    assert "sac_pendulum (SAC)" in actor["name"] and actor["ceiling"] == env["figure"], actor
    assert "CPU time" in cpu["name"] and cpu["figure"] > 0 and cpu["ceiling"] > 0, cpu
    for row in (actor, cpu):
        assert row["figure"] > 0 and row["status"] == ("PASS" if row["ratio"] >= 0.7 else "MISS")


def test_local_section_runs_a_preset_as_a_user_and_with_the_benchmarks_settings(
    tmp_path, monkeypatch
):
    """Issue 30 item 6's row: the user's command at its defaults against
    benchmarks/slippery.py's settings, each in its own process (tabular Q on 4x4 here:
    seconds, where the table's slippery 8x8 PPO takes a minute each)."""
    monkeypatch.setattr(rows, "LOCAL_PRESET", ("tabular_q", 0))
    assert run.main(["--quick", "--only=local", f"--out={tmp_path}"]) == 0
    with open(tmp_path / "bench.json") as f:
        results = json.load(f)
    assert "errors" not in results
    for mode in ("user", "bench"):
        run_ = results["local"][mode]
        assert run_["solved"] and run_["env_steps"] > 0, run_
        assert 0 < run_["wall"] <= run_["command_wall"], run_  # the trainer inside the command
    (row,) = [r for r in results["rows"] if "as a user runs it" in r["name"]]
    assert row["name"].startswith("tabular_q seed 0") and "configs/tabular_q.py" in row["name"]
    assert (row["figure"], row["ceiling"]) == (
        results["local"]["user"]["wall"],
        results["local"]["bench"]["wall"],
    )
    assert row["status"] == ("PASS" if row["ratio"] <= 1.5 else "MISS")


# About 40-60 s on the shared 2-core machine at load 8-10: compiling the trainer's fused
# call and the ceiling's, both at a tiny size.
def test_local_sac_section_times_the_trainer_against_its_fused_ceiling(tmp_path, monkeypatch):
    """Issue 36's single-process row: distrl.local on sac_pendulum (gymnax Pendulum-v1)
    and one fused jitted loop of the same rollouts and updates, one after the other
    in one run, each after its first block (tiny networks and batches here)."""
    monkeypatch.setitem(run.SETTINGS["quick"], "fused_iterations", 2)
    monkeypatch.setitem(run.SETTINGS["quick"], "fused_calls", 2)
    tiny = ["--sac_pendulum.agent.hidden_sizes=(8,)", "--sac_pendulum.learner.batch_size=32"]
    tiny += ["--sac_pendulum.replay.min_size=256", "--sac_pendulum.replay.samples_per_insert=8"]
    assert run.main(["--quick", "--only=local_sac", f"--out={tmp_path}", *tiny]) == 0
    with open(tmp_path / "bench.json") as f:
        results = json.load(f)
    assert "errors" not in results
    measured = results["local_sac"]
    per_call = 2 * measured["iteration_steps"]  # 2 iterations of [16, 16]
    assert measured["shape"] == "[16, 16]" and measured["calls"] == 2, measured
    assert measured["updates_per_iteration"] == round(8 * 256 / 32) == 64
    assert measured["local"]["env_steps"] == measured["fused"]["env_steps"] == 2 * per_call
    (row,) = [r for r in results["rows"] if r["section"] == "5 single-process"]
    assert row["name"].startswith("sac_pendulum (SAC, gymnax Pendulum-v1) in distrl.local")
    assert row["figure"] == measured["local"]["steps_per_s"] > 0
    assert row["ceiling"] == measured["fused"]["steps_per_s"] > 0
    assert "64 updates of 32 per iteration" in row["note"]


# 65 s at load 1.5, about 2-7 min at load 20: two stage programs (Launchpad
# programs of four processes) start, each compiles its actor's rollout and learner's update.
def test_recurrent_section_measures_the_actor_against_its_scan_and_the_learner(tmp_path):
    """Issue 39's rows at a tiny size, for recurrent PPO (ppo_masked_cartpole: chunks) and
    R2D2 (r2d2_masked_cartpole: sequences from a replay table): each actor (its GRU state
    carried through the rollout and stored with each item) against a jitted scan of
    gymnax's CartPole and the same network carrying the state, side by side; its jitted
    update alone, then the real Learner alone on a table its real Actor filled (local_mp)."""
    ppo, r2d2 = "--ppo_masked_cartpole.", "--r2d2_masked_cartpole."
    tiny = [
        p + k
        for p in (ppo, r2d2)
        for k in ("actor.num_envs=4", "actor.unroll_length=8", "agent.core_size=8")
    ]
    tiny += [ppo + "agent.num_minibatches=2", r2d2 + "agent.hidden_sizes=(8,)"]
    tiny += [r2d2 + "replay.sequence_length=16", r2d2 + "learner.batch_sequences=4"]
    assert run.main(["--quick", "--only=recurrent", f"--out={tmp_path}", *tiny]) == 0
    with open(tmp_path / "bench.json") as f:
        results = json.load(f)
    assert "errors" not in results
    recurrent_rows = [r for r in results["rows"] if r["section"] == "7 recurrent"]
    assert len(recurrent_rows) == 8  # four rows per preset
    batches = {"ppo_masked_cartpole": "[8, 8]", "r2d2_masked_cartpole": "[16, 4]"}
    for name, batch in batches.items():
        measured = results["recurrent"][name]
        assert measured["actor"]["shape"] == "[8, 4]" and measured["update"]["batch"] == batch
        rollout, compute, update, learner = [
            r for r in recurrent_rows if r["name"].startswith(name + " ")
        ]
        scan = measured["actor"]["scan"]["env_steps_per_s"]
        for row in (rollout, compute):  # each against the same scan, judged at 0.8x
            assert row["figure"] > 0 and row["ceiling"] == scan > 0, row
            assert row["status"] == ("PASS" if row["ratio"] >= 0.8 else "MISS")
        assert "GRU state carried" in rollout["name"] and "[8, 4]" in rollout["name"]
        assert update["figure"] == measured["update"]["updates_per_s"] > 0
        assert learner["ceiling"] == update["figure"] and learner["figure"] > 0, learner
        assert learner["status"] == ("PASS" if learner["ratio"] >= 0.5 else "MISS")
        assert measured["stage_actor"]["env_steps_per_s"] > 0  # the actor that filled it


# About 2 min on the shared 2-core machine at load 6: a stage program and an end-to-end
# program start and compile, and a Reverb server process fills a table.
def test_capacity_section_measures_its_inputs_and_checks_the_model(tmp_path, monkeypatch):
    """The section at a small scale (DQN alone, 1 actor): the stage program's rates per
    core, the read ceiling per CPU-second, the prediction for this host beside the
    program end to end, its row within 25% and the report with every host's table."""
    from benchmarks import capacity_bench

    monkeypatch.setattr(rows, "CAPACITY", ("dqn",))
    monkeypatch.setattr(rows, "CAPACITY_CHECKS", {"dqn": ("dqn", {})})
    monkeypatch.setattr(rows, "CAPACITY_ACTORS", (1,))
    monkeypatch.setitem(run.SETTINGS["quick"], "window", 2.0)
    monkeypatch.setitem(run.SETTINGS["quick"], "ceiling_s", 0.1)
    assert run.main(["--quick", "--only=capacity", f"--out={tmp_path}"]) == 0
    with open(tmp_path / "bench.json") as f:
        results = json.load(f)
    assert "errors" not in results
    inputs = results["capacity"]["inputs"]["dqn"]
    assert (inputs["samples_per_step"], inputs["gated"]) == (4.0, False)  # configs/dqn.py's
    rates = capacity_bench.rates_of(inputs)
    assert min(rates.actor_per_core, rates.insert_per_core, rates.sample_per_core) > 0, rates
    assert capacity_bench.host_work_per_core(inputs) > 0
    check = results["capacity"]["checks"]["dqn-1"]
    (row,) = [r for r in results["rows"] if r["name"].startswith("dqn 1 actor: the capacity")]
    assert row["figure"] == check["predicted"] > 0 and row["ceiling"] == check["measured"] > 0
    assert row["status"] == ("PASS" if abs(row["ratio"] - 1) <= 0.25 else "MISS")
    assert (row["platform"], row["device"]) == ("cpu", "cpu")
    # the machine's cores hold the program's and other work's (equal, to rounding, alone)
    assert check["e2e"]["machine_cores"] >= check["cores_total"] - 1e-9 > 0
    assert [p["cores"] for p in check["predictions"]][1:] == [str(os.cpu_count())]
    text = (tmp_path / "capacity.md").read_text()
    assert "| 208 | CPU learner |" in text and "- dqn-1, measured" in text
