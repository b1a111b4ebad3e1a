"""launch/train.py as a user runs it: real local_mp processes, bad input, signals, and
what a launch clears first (a dead launcher's folders).

Each launch runs in its own process session so the test can check that every
process the program started has exited afterwards.
"""

import contextlib
import fcntl
import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest
from conftest import (
    assert_nothing_left,
    launch_train,
    listening_addresses,
    load_config,
    session_processes,
)

from distrl.program import launcher, ports

# launch/train.py arguments (after --config=configs/dqn.py --run_dir={tmp}/run; {tmp}
# is the fixture's folder) and a part of the one-line message they must give.
BAD_INPUTS = [
    (["--config.algorithm=sarsa"], "config.algorithm='sarsa' is unknown;"),
    (["--config.algorithm=ppo"], "--config.algorithm cannot be overridden"),
    (["--config.env.map=9x9"], "unknown map name '9x9'; valid names: ['4x4', '8x8']"),
    (["--config.num_actors=0"], "config.num_actors=0; need >= 1"),
    (
        ["--config.learner.batch_size=128000", "--config.replay.max_size=1024"],
        "config.replay.max_size=1024 transitions is smaller than the batch",
    ),
    (["--config.replay.max_size=1000"], "config.replay.max_size=1000 transitions; need a multiple"),
    (["--config.replay.error_buffer=2"], "config.replay.error_buffer=2.0 transitions can never"),
    (["--config.env.map=SFF/FHH/FFX"], "unknown letter"),
    (["--config.env.map=SFH/HHH/FFG"], "no path from S to G"),
    (
        ["--lp_launch_type=local_mt"],
        "launch type 'local_mt' is unknown; valid: ('local_mp', 'test_mt', 'ray')",
    ),
    (
        ["--config=configs/ppo.py", "--config.agent.learning_rate=nan"],
        "config.agent.learning_rate=nan; need a finite number",
    ),
    (["--config.agent.learning_rate=inf"], "config.agent.learning_rate=inf; need a finite number"),
    (
        ["--config.agent.learning_rate=0"],
        "config.agent.learning_rate=0.0; need a finite number > 0",
    ),
    (
        ["--config=configs/a2c.py", "--config.agent.learning_rate=-1"],
        "config.agent.learning_rate=-1.0; need a finite number > 0",
    ),
    (
        ["--config.agent.optimizer=bogus"],
        "config.agent.optimizer='bogus'; need one of 'adam', 'sgd'",
    ),
    (["--config.actor.epsilon_spread=nan"], "config.actor.epsilon_spread=nan; need a finite"),
    (["--config.num_actors=2.5"], "flag --config.num_actors=2.5: invalid literal for int()"),
    (["--config.env.slippery=maybe"], "flag --config.env.slippery=maybe: ('Non-boolean argument"),
    (["--foo=1"], "Unknown command line flag 'foo'"),
    (
        ["--config.env.slipery=True"],
        "config.env.slipery is unknown (in --config.env.slipery); "
        "valid fields of config.env: hidden_observation, kwargs, map, name, rewards, "
        "slippery, step_timeout_s, "
        "time_limit, vector",
    ),
    (
        ["--config.env.name=no_such_pkg.envs:make"],
        "config.env.name='no_such_pkg.envs:make': cannot import no_such_pkg.envs",
    ),
    (
        ["--config.env.name=tests.user_envs:raising", '--config.env.kwargs={"size": 8}'],
        "config.env.name='tests.user_envs:raising': the factory raised ValueError",
    ),
    (
        ["--config.env.name=tests.user_envs:not_an_env"],
        "returned a dict, not an environment",
    ),
    (  # a gymnax-style answer (tests/gymnax_user_envs.py) is the env or the pair, nothing else
        ["--config.env.name=tests.gymnax_user_envs:two_numbers"],
        "returned a tuple, not an environment: need spec, reset, step and observe "
        "(distrl.envs.interface), a gymnax Environment or the (env, params) pair",
    ),
    (
        ["--config.env.name=tests.gymnax_user_envs:pair_without_a_time_limit"],
        "Contexts's params (dict) have max_steps_in_episode=None: need a whole number >= 1",
    ),
    (
        ["--config.env.name=tests.user_envs:make_contexts", "--config.evaluator.target_success=1"],
        "config.evaluator.target_success=1.0: the env (Contexts) has no success signal",
    ),
    (
        ["--config=configs/ppo.py", "--config.agent.epsilon_init=1"],
        "config.agent.epsilon_init is unknown",
    ),
    (["--config=configs/nope.py"], "config file 'configs/nope.py' does not exist"),
    # R2D2 (issue 39): sequences too short for burn-in + n-step, Box actions
    (
        ["--config=configs/r2d2_memory_chain.py", "--config.replay.sequence_length=12"],
        "config.replay.sequence_length=12 is shorter than config.agent.burn_in=8 + "
        "config.agent.n_step=5; need at least 13",
    ),
    (
        [
            "--config=configs/r2d2_memory_chain.py",
            "--config.env.name=gymnax:Pendulum-v1",
            "--config.env.kwargs={}",
        ],
        "config.algorithm='r2d2': acts in Discrete action spaces; this env's actions are Box",
    ),
    # The env presets (tests/test_presets.py): a bad value in each exits 2 in one line.
    (
        ["--config=configs/ppo_cartpole.py", "--config.evaluator.target_success=0.9"],
        "config.evaluator.target_success=0.9: the env (GymnaxEnv) has no success signal",
    ),
    (
        ["--config=configs/dqn_cartpole.py", "--config.evaluator.confirm_envs=0"],
        "config.evaluator.confirm_envs=0 episodes; need 1 .. 1,000,000",
    ),
    (
        ["--config=configs/ppo_breakout.py", "--config.agent.conv_kernel=0"],
        "config.agent.conv_kernel=0; need an integer >= 1",
    ),
    (
        ["--config=configs/dqn_breakout.py", "--config.replay.max_size=1000"],
        "config.replay.max_size=1000 transitions; need a multiple",
    ),
    # A recurrent core where no state can travel (tests/test_recurrent.py).
    (
        ["--config=configs/ppo.py", "--config.agent.advantage=grpo", "--config.agent.core=gru"],
        "config.agent.core='gru': the episodes pipeline of config.algorithm='ppo' cannot carry",
    ),
    # Actions an agent cannot take (tests/test_spaces.py).
    (
        ["--config.env.name=gymnax:Pendulum-v1"],
        "config.algorithm='dqn': acts in Discrete action spaces; this env's actions are Box(",
    ),
    (
        ["--config=configs/tabular_q.py", "--config.env.name=gymnax:Pendulum-v1"],
        "config.algorithm='tabular': acts in Discrete action spaces",
    ),
    (
        ["--config=configs/ppo.py", "--config.env.name=tests.user_envs:make_target"]
        + ['--config.env.kwargs={"low": "-Infinity"}'],
        "Box bounds [-inf, 2.0] are not finite",
    ),
    (
        ["--config=configs/ppo.py", "--config.env.name=tests.user_envs:make_target"]
        + ['--config.env.kwargs={"shape": [2, 2]}'],
        "config.algorithm='ppo': Box actions of shape (2, 2); the networks take one axis",
    ),
    # Observation elements hidden (tests/test_observation.py): out of range, or a Python env's.
    (
        ["--config=configs/ppo_cartpole.py", "--config.env.hidden_observation=(1,4)"],
        "config.env.hidden_observation=(1, 4): [4] are not elements of the observation; need",
    ),
    (
        ["--config=configs/ppo_gymnasium_cartpole.py", "--config.env.hidden_observation=(1,)"],
        "'gymnasium:CartPole-v1' is stepped in Python; only a JAX env",
    ),
    (["--config={tmp}/broken.py"], "invalid syntax (broken.py, line 1)"),
    (["--run_dir={tmp}/file"], "is a file, not a directory"),
    (["--run_dir=/proc/1/run"], "/proc/1 is not writable"),
    (["--resume="], "--resume= is empty; give the run directory to continue"),
    (["--run_dir="], "--run_dir= is empty; give a directory"),
    (["--resume={tmp}/corrupt"], "config.json is not valid JSON"),
    (["--resume={tmp}/older"], "config lacks"),
    (["--config.num_actors=1000000"], "(num_actors=1000000 processes x 0.6 GB"),
    (["--config.replay.max_size=1000000000000000"], "replay 130,385,160.4 GB (replay.max_size="),
    (["--config.actor.unroll_length=1000000000"], "unroll_length=1000000000 x num_envs=64)"),
    (
        ["--config.agent.hidden_sizes=(100000,100000)"],
        "(hidden_sizes=(100000, 100000): 10,002,200,004 parameters",
    ),
    (["positional"], "unexpected arguments ['positional']"),
    # Passed the permission bits (root), then failed at the lock with a traceback.
    (["--run_dir=/proc/x"], "run directory /proc/x: cannot create a directory in /proc (No such"),
    (
        ["--config.evaluator.num_envs=1000000000"],
        "config.evaluator.num_envs=1,000,000,000 episodes; need 1 .. 1,000,000",
    ),
    # Config files that give no ConfigDict: what the file did, not a symptom of it.
    (
        ["--config={tmp}/none.py", "--config.budget.seconds=5"],
        "none.py: get_config() returned None instead of a ConfigDict",
    ),
    (["--config={tmp}/a_dict.py"], "a_dict.py: get_config() returned a dict instead of a Conf"),
    (["--config={tmp}/raises.py"], "raises.py raised KeyError: 'X' at line 2"),
    (
        ["--fail_fast", "--config.restart.max_per_node=2"],
        "--fail_fast and --config.restart.max_per_node=2 contradict; give one",
    ),
]


@pytest.fixture(scope="module")
def bad_input_runs(tmp_path_factory, warm_python):
    """{case index: (exit status, output, run dir written?)} for every BAD_INPUTS case."""
    tmp = tmp_path_factory.mktemp("bad")
    (tmp / "broken.py").write_text("def get_config(:\n")
    (tmp / "none.py").write_text("def get_config():\n    pass\n")
    (tmp / "a_dict.py").write_text("def get_config():\n    return {'seed': 0}\n")
    (tmp / "raises.py").write_text("fields = {}\nX = fields['X']  # at import\n")
    (tmp / "file").write_text("x")
    for name, text in (("corrupt", "{not json"), ("older", '{"algorithm": "dqn", "seed": 0}')):
        (tmp / name).mkdir()
        (tmp / name / "config.json").write_text(text)
    results = {}
    for i, (args, _) in enumerate(BAD_INPUTS):
        run_dir = tmp / f"run{i}"
        args = [a.replace("{tmp}", str(tmp)) for a in args]
        if not any(a.startswith("--config=") for a in args):
            args.insert(0, "--config=configs/dqn.py")
        if not any(a.startswith(("--run_dir", "--resume")) for a in args):
            args.append(f"--run_dir={run_dir}")
        code, out, pid = warm_python.run("launch/train.py", *args)
        assert not session_processes(pid), f"case {i} left processes"
        results[i] = (code, out, run_dir.exists())
    return results


@pytest.mark.parametrize("case", range(len(BAD_INPUTS)), ids=[" ".join(a) for a, _ in BAD_INPUTS])
def test_bad_input_is_refused_before_any_process_starts(bad_input_runs, case):
    code, out, written = bad_input_runs[case]
    message = BAD_INPUTS[case][1]
    assert code == 2, out[-2000:]
    lines = [line for line in out.splitlines() if line.startswith("distrl: ")]
    assert len(lines) == 1 and message in lines[0], out[-2000:]
    assert lines[0].startswith(("distrl: bad config: ", "distrl: bad flag: ", "distrl: unexpected"))
    assert "Traceback" not in out and "FATAL" not in out
    assert "replay/0" not in out  # no node ever started
    assert not written  # nothing was written


def test_bad_input_in_a_fresh_interpreter_leaves_no_process(tmp_path):
    """A cold launch starts the preloaded parent (a fork of itself after its imports,
    or before them a new interpreter) before the flags are checked: a refused launch
    kills and reaps it before it exits, and nothing of its session is left. A child
    the parent had just forked (its fork probe, which exits at once) may outlive it by
    a moment: hence a grace, not an instant."""
    for args in (["--config.num_actors=abc"], ["--config.replay.max_size=7"]):
        proc = launch_train(["--config=configs/dqn.py", f"--run_dir={tmp_path}/run", *args])
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 2, out[-2000:]
        assert_nothing_left(proc)
        assert not (tmp_path / "run").exists()


def _unclaimed_server_ports(launcher_pid: int) -> dict:
    """{port: pid} of the run's listening servers whose claim (`distrl.program.ports`)
    this test could take, i.e. that no launcher holds."""
    found = {}
    for p in session_processes(launcher_pid):
        try:
            listening = [c for c in p.net_connections("tcp") if c.status == psutil.CONN_LISTEN]
        except (psutil.Error, OSError):
            continue
        for c in listening:
            claim = os.path.join(ports.claims_dir(), str(c.laddr.port))
            fd = os.open(claim, os.O_CREAT | os.O_RDWR)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                found[c.laddr.port] = p.pid
            except BlockingIOError:
                pass
            finally:
                os.close(fd)  # also drops the lock if this test took it
    return found


@pytest.mark.slow
def test_local_mp_dqn_two_actors_solves_and_exits_cleanly(tmp_path):
    run_dir = tmp_path / "run"
    proc = launch_train(
        [
            "--config=configs/dqn.py",
            "--lp_launch_type=local_mp",
            "--config.num_actors=2",
            f"--config.run_dir={run_dir}",
            "--config.budget.seconds=240",
            "--config.learner.device=cpu",
        ]
    )
    listening, unclaimed, deadline = {}, {}, time.time() + 400
    while proc.poll() is None and time.time() < deadline:
        for pid, ips in listening_addresses(session_processes(proc.pid)).items():
            listening.setdefault(pid, set()).update(ips)
        unclaimed.update(_unclaimed_server_ports(proc.pid))
        time.sleep(0.3)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out[-4000:]
    # Every node's server (Reverb, courier) listened, on loopback only, on a port the
    # launcher held a claim on (no other launcher could be given it).
    servers = {pid: ips for pid, ips in listening.items() if ips}
    assert len(servers) >= 6, servers
    assert not unclaimed, unclaimed
    assert set().union(*servers.values()) <= {"127.0.0.1", "::ffff:127.0.0.1"}, servers
    result = json.loads((run_dir / "result.json").read_text())
    assert result["stop_reason"] == "target_reached", result
    assert result["evaluation"]["success_rate"] == 1.0
    assert "success rate 1.000" in out and "greedy policy:" in out
    # Node output goes to one file per node in the run directory, not to the terminal,
    # which shows the launcher's progress lines instead.
    for node in ("replay/0", "counter/0", "learner/0", "actor/0", "actor/1", "evaluator/0"):
        assert f"[{node}]" not in out
        path = run_dir / "logs" / "nodes" / node
        assert path.exists() and path.stat().st_size > 0, f"{node} wrote no output file"
    assert "success 1.00" in (run_dir / "logs" / "nodes" / "evaluator" / "0").read_text()
    # The learner runs on the platform asked for (learner.device); the actors on the CPU.
    assert "learner: updating on cpu" in (run_dir / "logs" / "nodes" / "learner" / "0").read_text()
    for i in (0, 1):
        assert f"actor {i}: acting on cpu" in (run_dir / "logs/nodes/actor" / str(i)).read_text()
    # The preloaded parent was forked from the launcher after its imports (the launcher
    # executed itself again with the bind shim: its nodes listened on loopback only,
    # above), then adopted.
    launcher_log = (run_dir / "logs" / "nodes" / "launcher").read_text()
    assert "a fork of the launcher, its imports done" in launcher_log, launcher_log
    assert "started with the command, adopted" in launcher_log, launcher_log
    assert "starts the plain way" not in launcher_log, launcher_log
    assert "env steps" in out and len(out.splitlines()) < 60, out
    for node in ("actor_0", "actor_1", "learner", "evaluator", "replay"):
        assert (run_dir / "logs" / f"{node}.csv").exists(), node
    # Launchpad's pickled node groups went to the run directory and were removed.
    assert (run_dir / "tmp").is_dir() and not list((run_dir / "tmp").iterdir())
    assert_nothing_left(proc)


def _wait_for_evaluator_rows(run_dir, proc, timeout_s=240):
    """Until the evaluator has logged a row (training under way) or the launcher exited."""
    deadline = time.time() + timeout_s
    path = run_dir / "logs" / "evaluator.csv"
    while time.time() < deadline and proc.poll() is None:
        if path.exists() and len(path.read_text().splitlines()) >= 2:
            return
        time.sleep(0.5)


# Ctrl-C in the default mode (node output to files), SIGTERM with every node's
# output in this terminal (the debugging mode).
@pytest.mark.slow
@pytest.mark.parametrize(
    "sig,terminal",
    [(signal.SIGINT, "output_to_files"), (signal.SIGTERM, "current_terminal")],
    ids=["ctrl-c", "sigterm"],
)
def test_signal_stops_every_node(tmp_path, sig, terminal):
    run_dir = tmp_path / "run"
    proc = launch_train(
        [
            "--config=configs/ppo.py",
            "--lp_launch_type=local_mp",
            f"--terminal={terminal}",
            f"--config.run_dir={run_dir}",
            "--config.evaluator.target_success=0",
            "--config.budget.seconds=300",
            "--config.budget.env_steps=0",
        ]
    )
    lines = []
    if terminal == "current_terminal":
        for line in proc.stdout:  # wait until training is under way
            lines.append(line)
            if "[evaluator/0] [" in line:
                break
    else:
        _wait_for_evaluator_rows(run_dir, proc)
    if sig == signal.SIGINT:
        os.killpg(proc.pid, sig)  # a terminal's Ctrl-C reaches the whole group
    else:
        proc.send_signal(sig)  # `kill <launcher pid>`
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode != 0, "".join(lines) + out
    assert_nothing_left(proc)


_STUCK_NODE_PROGRAM = """
import signal, sys, time
import launchpad as lp
import ml_collections
from absl import app
from distrl.program import supervisor

def stuck():  # a node whose main thread never runs Python's SIGTERM handler
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTERM])
    time.sleep(120)

def stopper():
    time.sleep(3)
    lp.stop()

def main(argv):
    p = lp.Program("stuck")
    with p.group("stuck"):
        p.add_node(lp.PyNode(stuck))
    with p.group("stopper"):
        p.add_node(lp.PyNode(stopper))
    config = ml_collections.ConfigDict(dict(restart=dict(max_per_node=0, backoff_seconds=1.0)))
    supervisor.run(p, config, argv[1], {"stuck": {}, "stopper": {}}, sys.stdout,
                   "current_terminal")
    print("launcher survived", flush=True)

app.run(main)
"""


@pytest.mark.slow
def test_a_node_that_ignores_the_stop_is_killed_and_the_launcher_survives(tmp_path):
    script = tmp_path / "stuck.py"
    script.write_text(_STUCK_NODE_PROGRAM)
    run_dir = tmp_path / "run"
    proc = launch_train(
        [], executable_args=[str(script), str(run_dir), "--lp_termination_notice_secs=3"]
    )
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, out[-3000:]
    assert "launcher survived" in out
    log = (run_dir / "logs" / "nodes" / "launcher").read_text()
    assert "did not terminate in time: ['stuck']" in log, log
    # Its stack was dumped into its output before the kill, main thread in sleep().
    assert "[stuck/0] Current thread" in out and " in stuck\n" in out, out[-3000:]
    assert_nothing_left(proc)


@pytest.mark.slow
def test_local_mp_slippery_4x4_reaches_98_percent_of_the_exact_optimum(tmp_path):
    """DQN with the slippery preset's settings on slippery 4x4, 2 actors: the run stops
    once 10,000 greedy episodes put the success's lower bound at 98% of the exact
    optimum (0.740), and the greedy policy's exact success agrees."""
    run_dir = tmp_path / "run"
    proc = launch_train(
        [
            "--config=configs/dqn_slippery8x8.py",
            "--lp_launch_type=local_mp",
            "--config.num_actors=2",
            "--config.env.map=4x4",
            f"--config.run_dir={run_dir}",
            "--config.budget.seconds=300",
        ]
    )
    out, _ = proc.communicate(timeout=500)
    assert proc.returncode == 0, out[-4000:]
    result = json.loads((run_dir / "result.json").read_text())
    assert result["stop_reason"] == "target_reached", result
    answer, ev = result["exact"], result["evaluation"]
    assert answer["optimal_success"] == pytest.approx(0.740, abs=1e-3)
    assert ev["episodes"] == 10_000 and ev["success_low"] >= 0.98 * answer["optimal_success"]
    assert answer["ratio"] >= 0.98, answer
    assert "95% Wilson, 10000 episodes" in out and "optimal 0.740" in out
    assert_nothing_left(proc)


def test_only_the_folders_of_dead_launchers_are_removed(tmp_path):
    """A SIGKILLed launcher leaves tmp/launch-<pid>/; the next launch there removes it,
    never the folder of a live launcher, nor anything else in tmp/."""
    dead = subprocess.Popen([sys.executable, "-c", ""])  # a launcher's pid, no longer alive
    dead.wait()
    tmp = tmp_path / "run" / "tmp"
    for name in (f"launch-{dead.pid}", f"launch-{os.getpid()}", "other"):
        (tmp / name).mkdir(parents=True)
        (tmp / name / "node.pkl").write_text("x")
    config = load_config("dqn")
    config.run_dir = str(tmp_path / "run")
    with contextlib.ExitStack() as stack:
        launcher.prepare(config, resume=False, stack=stack)
    assert sorted(os.listdir(tmp)) == sorted([f"launch-{os.getpid()}", "other"])
