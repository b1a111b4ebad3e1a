"""--lp_launch_type=ray: the same program on a multi-node Ray cluster.

Three Ray nodes, each its own raylet: a head with no CPUs that holds the
"replay_host" resource, a worker with 2 CPUs that holds "learner_host", and a
second worker with 2 CPUs; both workers hold "spare_host" (a replay that may run on
either, for the test that loses the machine it runs on). As root (CI here), each
worker is its own network host: a network namespace with its own address on a
private bridge (`netns_cluster.py`);
otherwise Ray's own `ray.cluster_utils.Cluster` on this machine's address. So the
replay runs on the head, the learner on the first worker, and the actors (1 CPU
each, spread) on both workers. Each run checks where every node actually ran (the
Ray node its host actor reported), that handles resolved to those hosts, that the
servers listened on the cluster address only, and that nothing was left behind.
"""

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import types

import netns_cluster
import psutil
import pytest
import ray
from conftest import assert_nothing_left, launch_train, listening_addresses, load_config
from launchpad import address as lp_address
from test_recovery import _rows as _supervised_rows
from test_scale import _acting, _env_steps, _grows, _scale

from distrl import experiment as experiment_lib
from distrl.config import ConfigError
from distrl.program import launcher, scaling, staging, stopping, topology
from distrl.program.errors import LaunchError
from distrl.program.ray import cluster as cluster_lib
from distrl.program.ray import hosts, placement
from distrl.records import rundir

PLACE = ["--config.ray.replay_resource=replay_host", "--config.ray.learner_resource=learner_host"]


HEAD = dict(num_cpus=0, resources={"replay_host": 1})
WORKERS = [
    dict(num_cpus=2, resources={"learner_host": 1, "spare_host": 1}),
    dict(num_cpus=2, resources={"spare_host": 1}),
]


@pytest.fixture(scope="module")
def ray_cluster():
    """Three Ray nodes; each its own network host when this machine allows (root, `ip`)."""
    head, workers = HEAD, WORKERS
    if netns_cluster.available():
        c = netns_cluster.NetnsRayCluster(head, workers).start()
        try:
            ids = c.node_ids()
            lost = []  # indices of the workers taken down

            def lose(node_id):  # the worker machine that is Ray node `node_id` goes down
                i = [ids[ip] for ip in c.worker_ips].index(node_id)
                lost.append(i)
                c.lose_worker(i)

            def restore():  # the lost workers back, as new Ray nodes
                while lost:
                    c.restart_worker(lost.pop())
                ids.update(c.node_ids())
                cluster.learner, cluster.other = (ids[ip] for ip in c.worker_ips)

            def cut(node_id, seconds):  # that worker's link down for `seconds`, then up
                c.cut_link([ids[ip] for ip in c.worker_ips].index(node_id), seconds)

            def lose_head():  # the head machine goes down (this process's driver first:
                ray.shutdown()  # a driver of a lost head ends its process once Ray gives up)
                c.lose_head()

            def new_cluster():  # a new head and workers, the module's cluster from now on
                nonlocal c
                c.shutdown()
                c = netns_cluster.NetnsRayCluster(head, workers).start()
                lost.clear()
                ids.clear()
                ids.update(c.node_ids())
                cluster.address, cluster.head = c.address, ids[c.head_ip]
                cluster.learner, cluster.other = (ids[ip] for ip in c.worker_ips)
                cluster.sessions = c.sessions

            cluster = types.SimpleNamespace(
                address=c.address,
                head=ids[c.head_ip],
                learner=ids[c.worker_ips[0]],
                other=ids[c.worker_ips[1]],
                separate_hosts=True,
                lose=lose,
                restore=restore,
                cut=cut,
                lose_head=lose_head,
                new_cluster=new_cluster,
                sessions=c.sessions,
            )
            yield cluster
        finally:
            c.shutdown()
        return
    from ray.cluster_utils import Cluster  # noqa: PLC0415 - starts nothing until called

    c = Cluster(initialize_head=True, head_node_args=dict(**head, include_dashboard=False))
    worker_nodes = [c.add_node(**w) for w in workers]
    c.wait_for_nodes()
    ray.init(address=c.address)  # this test's own driver, to look at the cluster
    lost = []

    def lose(node_id):  # its raylet and every process of that Ray node killed
        i = [w.node_id for w in worker_nodes].index(node_id)
        lost.append(i)
        c.remove_node(worker_nodes[i], allow_graceful=False)

    def restore():
        while lost:
            i = lost.pop()
            worker_nodes[i] = c.add_node(**workers[i])
        c.wait_for_nodes()
        cluster.learner, cluster.other = (w.node_id for w in worker_nodes)

    cluster = types.SimpleNamespace(
        address=c.address,
        head=c.head_node.node_id,
        learner=worker_nodes[0].node_id,
        other=worker_nodes[1].node_id,
        separate_hosts=False,
        lose=lose,
        restore=restore,
        cut=None,  # one network here: no link of a node's own to cut
        lose_head=None,  # nor a head machine of its own to lose
        new_cluster=None,
        sessions=None,
    )
    try:
        yield cluster
    finally:
        ray.shutdown()
        c.shutdown()


def _train_on(ray_cluster, args):
    return launch_train(["--lp_launch_type=ray", f"--ray_address={ray_cluster.address}"] + args)


@contextlib.contextmanager
def _training(ray_cluster, args):
    """`_train_on`'s launcher, killed with its session if the test fails while it runs
    (its host actors die with their owner), so that no run outlives its test."""
    proc = _train_on(ray_cluster, args)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate(timeout=60)


def _watch(proc, run_dir, timeout_s=400):
    """Waits for the launcher; returns ({node name: listening ips}, output)."""
    listening, deadline = {}, time.time() + timeout_s
    placement_file = run_dir / hosts.PLACEMENT_FILE
    while proc.poll() is None and time.time() < deadline:
        if placement_file.exists():
            nodes = json.loads(placement_file.read_text())
            by_pid = {v["pid"]: name for name, v in nodes.items()}
            for pid, ips in listening_addresses(_processes(by_pid)).items():
                listening.setdefault(by_pid[pid], set()).update(ips)
        time.sleep(0.3)
    out, _ = proc.communicate(timeout=60)
    return listening, out


def _processes(pids):
    found = []
    for pid in pids:
        try:
            found.append(psutil.Process(pid))
        except psutil.NoSuchProcess:
            pass
    return found


def _cluster_processes(ray_cluster) -> list[str]:
    """Command lines of this cluster's node processes and host workers: those in its
    processes' sessions when it knows them (`netns_cluster`), else any Ray node
    process (its pickle in a NodeHost's distrl-node-* folder) of this checkout's
    Python and any host worker. The suite's other workers, and other checkouts on a
    shared machine, run local_mp nodes and Ray clusters of their own."""
    found = []
    for p in psutil.process_iter(["cmdline"]):
        cmd = " ".join(p.info["cmdline"] or [])
        try:
            if ray_cluster.sessions is not None:
                ours = os.getsid(p.pid) in ray_cluster.sessions()
            else:
                ours = "/distrl-node-" in cmd and cmd.startswith(sys.executable)
        except ProcessLookupError:
            continue
        if ours and ("process_entry.py" in cmd or "NodeHost" in cmd):
            found.append(cmd)
    return found


def _nothing_left_on(ray_cluster, proc):
    """No host actor is alive, no node process or host worker runs anywhere."""
    assert_nothing_left(proc)
    deadline = time.time() + 20
    while True:
        actors = [
            a
            for a in ray.util.list_named_actors(all_namespaces=True)
            if a["namespace"] == cluster_lib.NAMESPACE
        ]
        procs = _cluster_processes(ray_cluster)
        if not (actors or procs) or time.time() > deadline:
            break
        time.sleep(0.5)
    assert not actors, actors
    assert not procs, procs


@pytest.mark.slow
@pytest.mark.cluster
# DQN with 4 actors checks all that DQN with 2 would (both workers hold actors), and PPO
# the on-policy queue.
@pytest.mark.parametrize("config,num_actors", [("ppo", 2), ("dqn", 4)])
def test_runs_on_several_ray_nodes_to_success(ray_cluster, tmp_path, config, num_actors):
    run_dir = tmp_path / "run"
    proc = _train_on(
        ray_cluster,
        [
            f"--config=configs/{config}.py",
            f"--config.num_actors={num_actors}",
            f"--config.run_dir={run_dir}",
            "--config.budget.seconds=240",
            *PLACE,
        ],
    )
    listening, out = _watch(proc, run_dir)
    assert proc.returncode == 0, out[-4000:]
    result = json.loads((run_dir / "result.json").read_text())
    assert result["stop_reason"] == "target_reached", result
    assert result["evaluation"]["success_rate"] == 1.0

    # Where each node ran, as its host actor's Ray runtime reported it.
    where = json.loads((run_dir / hosts.PLACEMENT_FILE).read_text())
    actors = [f"actor/{i}" for i in range(num_actors)]
    assert set(where) == {"replay", "counter", "learner", "evaluator", *actors}
    assert where["replay"]["ray_node"] == ray_cluster.head
    assert where["learner"]["ray_node"] == ray_cluster.learner
    actor_nodes = {where[a]["ray_node"] for a in actors}
    assert actor_nodes == {ray_cluster.learner, ray_cluster.other}, where  # spread, off the head
    if ray_cluster.separate_hosts:  # three addresses: a loopback address would not connect
        assert len({where[a]["ip"] for a in actors} | {where["replay"]["ip"]}) == 3, where

    # Handles resolved to the serving node's host and port.
    replay = f"{where['replay']['ip']}:{where['replay']['ports'][0]}"
    for a in actors:
        node_output = (run_dir / "logs" / "nodes" / "actor" / a.split("/")[1]).read_text()
        assert f"Reverb client connecting to: {replay}" in node_output

    # Each server listened on its host's cluster address, not on every interface.
    for name in ("replay", "learner", "counter"):
        ip = where[name]["ip"]
        assert listening.get(name), (name, listening)
        assert listening[name] <= {ip, f"::ffff:{ip}"}, (name, listening[name])
    _nothing_left_on(ray_cluster, proc)


def _finish(proc, timeout_s=120):
    """The launcher's output once it has exited. If it has not within `timeout_s`, it and
    its session are killed (its host actors die with their owner, and their nodes with
    them, so the next tests do not find them) and the test fails with its output."""
    try:
        return proc.communicate(timeout=timeout_s)[0]
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out = proc.communicate(timeout=60)[0]
        pytest.fail(f"the launcher did not exit within {timeout_s} s; its output:\n{out[-4000:]}")


def _wait_for_training(run_dir, proc, timeout_s=240):
    deadline = time.time() + timeout_s
    path = run_dir / "logs" / "evaluator.csv"
    while time.time() < deadline and proc.poll() is None:
        if path.exists() and len(path.read_text().splitlines()) >= 2:
            return json.loads((run_dir / hosts.PLACEMENT_FILE).read_text())
        time.sleep(0.5)
    raise AssertionError(f"training did not start: {proc.communicate(timeout=60)[0][-4000:]}")


def _last_row(path):
    """The evaluator CSV's last row as {column: value}."""
    lines = path.read_text().splitlines()
    return dict(zip(lines[0].split(","), map(float, lines[-1].split(","))))


def _until(condition, proc, what: str, timeout_s: float = 240):
    """Polls `condition()` until it is truthy, while the launcher runs; fails naming `what`."""
    deadline = time.time() + timeout_s
    while not (found := condition()):
        if proc.poll() is not None or time.time() > deadline:
            pytest.fail(f"{what}: not seen within {timeout_s:.0f} s while the run lasted")
        time.sleep(0.5)
    return found


def _started_again(run_dir, before, *names) -> bool:
    """Each of `names` runs a new process (the placement's), its restart listed, and no
    node's failure report waits outside failures/restarted/."""
    now = json.loads((run_dir / hosts.PLACEMENT_FILE).read_text())
    listed = {p.name.rsplit("-", 1)[0] for p in (run_dir / "failures" / "restarted").glob("*")}
    return (
        all(now[n].get("pid") not in (None, before[n]["pid"]) for n in names)
        and {n.replace("/", "_") for n in names} <= listed
        and not list((run_dir / "failures").glob("*.txt"))
    )


def _grew_since(run_dir, row) -> dict | None:
    """A later evaluator row than `row` with more env steps and a newer policy, or None."""
    last = _last_row(run_dir / "logs" / "evaluator.csv")
    grew = last["env_steps"] > row["env_steps"] and last["param_version"] > row["param_version"]
    return last if grew else None


@pytest.mark.slow
@pytest.mark.cluster
def test_failed_nodes_start_again_on_their_host_or_elsewhere_and_the_run_goes_on(
    ray_cluster, tmp_path
):
    run_dir = tmp_path / "run"
    args = _endless(run_dir) + ["--config.restart.max_per_node=1"]
    with _training(ray_cluster, args) as proc:
        before = _wait_for_training(run_dir, proc)
        at_kill = _until(  # kill while it trains, not while it starts up
            lambda: (r := _last_row(run_dir / "logs" / "evaluator.csv"))["env_steps"] > 0 and r,
            proc,
            "env steps",
        )
        psutil.Process(before["learner"]["pid"]).kill()  # same host and port, its checkpoint
        psutil.Process(before["actor/1"]["pid"]).kill()
        psutil.Process(before["actor/0"]["host_pid"]).kill()  # its host lost: placed again
        # The run goes on: once every restart is listed and training has moved on since,
        # it is stopped as a user stops it (the checks below need nothing more).
        _until(
            lambda: _started_again(run_dir, before, "learner", "actor/0", "actor/1"),
            proc,
            "the three nodes started again",
        )
        restarted = _last_row(run_dir / "logs" / "evaluator.csv")
        _until(lambda: _grew_since(run_dir, restarted), proc, "training after the restarts")
        proc.send_signal(signal.SIGINT)
        out = _finish(proc, timeout_s=120)
    assert proc.returncode == 130, out[-4000:]
    result = json.loads((run_dir / "result.json").read_text())
    assert result["stop_reason"] == "stopped", result
    restarts = {r["node"]: r for r in result["restarts"]}
    assert set(restarts) == {"learner", "actor/0", "actor/1"}, result["restarts"]
    assert "exited with code -9" in restarts["actor/1"]["cause"]
    assert "its host was lost" in restarts["actor/0"]["cause"]  # its actor died, not its node
    for name in restarts:
        assert f"restarted {name} at" in out, out[-4000:]  # the summary lists each restart
        assert (run_dir / "failures" / "restarted" / f"{name.replace('/', '_')}-1.txt").exists()
    assert not list((run_dir / "failures").glob("*.txt"))  # no failure ended the run

    after = json.loads((run_dir / hosts.PLACEMENT_FILE).read_text())
    for name in ("learner", "actor/1"):  # the same host actor, machine and ports
        assert after[name]["host_pid"] == before[name]["host_pid"]
        assert after[name]["ports"] == before[name]["ports"]
        assert after[name]["pid"] != before[name]["pid"]
    assert after["actor/0"]["host_pid"] != before["actor/0"]["host_pid"]  # a new host actor
    # Training went on after the restarts: more env steps and newer parameters.
    end = _last_row(run_dir / "logs" / "evaluator.csv")
    assert (
        end["env_steps"] > at_kill["env_steps"] and end["param_version"] > at_kill["param_version"]
    )
    _nothing_left_on(ray_cluster, proc)


def _rows(path):
    """The evaluator CSV's rows as {column: value}."""
    lines = path.read_text().splitlines()
    return [dict(zip(lines[0].split(","), map(float, line.split(",")))) for line in lines[1:]]


def _outage(rows, since: float) -> float:
    """Seconds (evaluator time) from `since` until env steps grew again after the longest
    stall that followed (counts already in flight may still arrive just after `since`)."""
    last, steps, longest, end = since, None, 0.0, float("inf")
    for r in rows:
        if steps is not None and r["elapsed"] > since and r["env_steps"] > steps:
            if r["elapsed"] - last > longest:
                longest, end = r["elapsed"] - last, r["elapsed"]
            last = r["elapsed"]
        steps = r["env_steps"]
    return end - since


@pytest.mark.slow
@pytest.mark.cluster
def test_a_lost_machine_holding_the_replay_is_replaced_and_training_goes_on(ray_cluster, tmp_path):
    """A whole worker machine, the replay's, goes down mid-training: the replay is placed
    on the other worker from its newest checkpoint, the nodes holding its address are
    restarted with the new one, and the run reaches success 1.0 and exits 0."""
    run_dir = tmp_path / "run"
    args = [
        "--config=configs/dqn.py",
        f"--config.run_dir={run_dir}",
        "--config.ray.replay_resource=spare_host",  # on either worker
        "--config.ray.learner_resource=replay_host",  # on the head, which stays up
        "--config.evaluator.target_success=0",  # trains on past the loss, until stopped
        "--config.budget.env_steps=0",
        "--config.budget.seconds=300",
        "--config.restart.max_per_node=1",
        "--config.checkpoint.every_seconds=5",
    ]
    holders = ("learner", "actor/0", "actor/1", "evaluator")
    try:
        with _training(ray_cluster, args) as proc:
            before = _wait_for_training(run_dir, proc)
            kept = run_dir / "checkpoints" / "replay-kept"
            deadline = time.time() + 120
            while time.time() < deadline and proc.poll() is None:
                # Env steps flowing (the evaluator's first rows can come before any) and
                # a sealed replay checkpoint to load elsewhere (rounds start before both).
                at_kill = _last_row(run_dir / "logs" / "evaluator.csv")
                if at_kill["env_steps"] > 0 and list(kept.glob("*/distrl.json")):
                    break
                time.sleep(0.5)
            assert at_kill["env_steps"] > 0 and list(kept.glob("*/distrl.json")), at_kill
            lost = before["replay"]["ray_node"]
            (kept_up,) = {ray_cluster.learner, ray_cluster.other} - {lost}  # the replay's
            ray_cluster.lose(lost)
            lost_at = at_kill["elapsed"] + 0.5  # the row is at most one evaluation period old
            # Once the replay and every holder of its address run again and a policy
            # trained since is perfect, the run is stopped as a user stops it; its final
            # evaluation (10,000 episodes) must be perfect too.
            _until(
                lambda: _started_again(run_dir, before, "replay", *holders),
                proc,
                "the replay and its holders started again",
            )
            moved = _last_row(run_dir / "logs" / "evaluator.csv")
            _until(
                lambda: (r := _grew_since(run_dir, moved)) and r["success_rate"] == 1.0,
                proc,
                "a perfect policy trained after the move",
            )
            proc.send_signal(signal.SIGINT)
            out = _finish(proc, timeout_s=120)
    finally:
        ray_cluster.restore()
    assert proc.returncode == 130, out[-4000:]
    result = json.loads((run_dir / "result.json").read_text())
    assert result["stop_reason"] == "stopped", result
    assert result["evaluation"]["success_rate"] == 1.0, result["evaluation"]

    after = json.loads((run_dir / hosts.PLACEMENT_FILE).read_text())
    assert after["replay"]["ray_node"] == kept_up, after  # the other machine with its resource
    if ray_cluster.separate_hosts:
        assert after["replay"]["ip"] != before["replay"]["ip"], after
    causes = {}
    for r in result["restarts"]:
        causes.setdefault(r["node"], []).append(r["cause"])
    assert any("its Ray node was lost" in c or "stopped answering" in c for c in causes["replay"])
    lost_names = {name for name, w in before.items() if w["ray_node"] == lost}
    for name in holders:  # every holder of its address
        assert name in causes, result["restarts"]
        if name not in lost_names:
            # "restarted: replay moved to host ..." (the counter may have moved with it)
            moved = [c for c in causes[name] if c.startswith("restarted: ")]
            assert any("replay moved to host" in c for c in moved), causes
            assert after[name]["host_pid"] == before[name]["host_pid"]  # on its own host
    for name in causes:
        assert f"restarted {name} at" in out, out[-4000:]  # the summary lists each restart
    assert not list((run_dir / "failures").glob("*.txt"))  # no failure ended the run
    # The replay came back from its newest verified checkpoint, in the shared run directory.
    replay_output = (run_dir / "logs" / "nodes" / "replay" / "0").read_text()
    assert "replay restarted from checkpoint" in replay_output, replay_output[-3000:]
    assert "Loading checkpoint from" in replay_output, replay_output[-3000:]  # Reverb's own

    # Counters never went back, and training went on past the loss.
    rows = _rows(run_dir / "logs" / "evaluator.csv")
    for column in ("env_steps", "episodes", "param_version"):
        values = [r[column] for r in rows]
        assert values == sorted(values), (column, values)
    assert rows[-1]["env_steps"] > at_kill["env_steps"]
    assert rows[-1]["param_version"] > at_kill["param_version"]
    outage = _outage(rows, lost_at)
    print(f"replay's machine lost at {lost_at:.1f} s; env steps grew again {outage:.1f} s later")
    _nothing_left_on(ray_cluster, proc)


class _Output:
    """The launcher's output, read as it comes (a thread), so that a test can wait for a line."""

    def __init__(self, proc):
        self.lines = []
        self._thread = threading.Thread(target=lambda: self.lines.extend(proc.stdout), daemon=True)
        self._thread.start()

    def text(self) -> str:
        return "".join(self.lines)

    def finish(self, proc, timeout_s=120) -> str:
        """All of it once the launcher has exited (killed with its session after `timeout_s`)."""
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=60)
        self._thread.join(timeout=60)
        return self.text()


# Long enough that the launcher's calls to the hosts there fail or go unanswered (a
# pause of 5-8 s was not even seen: TCP retransmits carried the calls over it), and
# that before issue 29 it moved them (a call failing as ActorUnavailableError once the
# link was up, or none answered for 31 s); short of Ray's verdict (health checks).
PAUSE_S = 20.0


@pytest.mark.slow
@pytest.mark.cluster
def test_a_network_pause_costs_no_move(ray_cluster, tmp_path):
    """The learner's worker machine is cut off the network for PAUSE_S (its link down,
    every process running) while the run trains: its hosts stop answering and Ray still
    counts the machine alive, so the launcher waits; once the link is up they answer
    again, nothing moved or restarted, and env steps grow again."""
    if not ray_cluster.separate_hosts:
        pytest.skip("needs each Ray node on a network host of its own (root and `ip`)")
    run_dir = tmp_path / "run"
    with _training(ray_cluster, _endless(run_dir)) as proc:
        output = _Output(proc)
        before = _wait_for_training(run_dir, proc)
        _until(
            lambda: _last_row(run_dir / "logs" / "evaluator.csv")["env_steps"] > 0,
            proc,
            "env steps",
        )
        cut_at = time.time()
        ray_cluster.cut(ray_cluster.learner, PAUSE_S)
        up = _last_row(run_dir / "logs" / "evaluator.csv")
        _until(lambda: _grew_since(run_dir, up), proc, "training after the link came back")
        cut_off = {n for n, w in before.items() if w["ray_node"] == ray_cluster.learner}
        _until(
            lambda: all(f"{n}'s host answers again" in output.text() for n in cut_off),
            proc,
            "the cut-off hosts answering again",
        )
        proc.send_signal(signal.SIGINT)
        out = output.finish(proc)
    assert proc.returncode == 130, out[-4000:]
    # The launcher saw the pause: the cut-off hosts were unreachable, then answered again.
    lines = out.splitlines()
    for name in cut_off:
        assert any(f"{name}'s host on host " in x and " is unreachable (" in x for x in lines), name
        assert any(f"{name}'s host answers again" in x for x in lines), name
    # Nothing moved and nothing restarted: every node ran on in its first process.
    result = json.loads((run_dir / "result.json").read_text())
    assert result["stop_reason"] == "stopped", result
    assert result["restarts"] == [], result["restarts"]
    assert not (run_dir / "failures").exists() or not any((run_dir / "failures").rglob("*.txt"))
    after = json.loads((run_dir / hosts.PLACEMENT_FILE).read_text())
    for name, w in before.items():
        assert (after[name]["host_pid"], after[name]["pid"]) == (w["host_pid"], w["pid"]), name
    rows = _rows(run_dir / "logs" / "evaluator.csv")
    for column in ("env_steps", "episodes", "param_version"):
        values = [r[column] for r in rows]
        assert values == sorted(values), (column, values)
    cut_elapsed = rows[0]["elapsed"] + (cut_at - rows[0]["time"])  # in the evaluator's time
    back = [x.split("distrl: ", 1)[-1] for x in lines if "answers again" in x or "reachable" in x]
    print(f"cut off for {PAUSE_S:.0f} s: {sorted(cut_off)}; {back}")
    print(f"env steps grew again {_outage(rows, cut_elapsed):.1f} s after the cut began")
    _nothing_left_on(ray_cluster, proc)


@pytest.mark.slow
@pytest.mark.cluster
def test_a_lost_head_is_named_in_the_run_directory_and_a_resume_never_counts_back(
    ray_cluster, tmp_path
):
    """The head machine lost while the run trains (every process of the head's `ray
    start`, then the launcher's session, SIGKILLed; the replay ran there): the hosts on the
    workers see neither launcher calls nor the GCS, the first writes failures/head.txt
    naming the cause and how to resume, and every node stops (the learner with its final
    checkpoint) before Ray ends them. `--resume` on a new head (a new cluster, the same
    run directory) continues with counts that never go back from the counter's last.

    The module's cluster is the one lost; the new one (`new_cluster`: names and a subnet
    of its own, made whatever happened here) is the module's from then on."""
    if not ray_cluster.separate_hosts:
        pytest.skip("needs each Ray node on a network host of its own (root and `ip`)")
    run_dir = tmp_path / "run"
    evaluator = run_dir / "logs" / "evaluator.csv"
    report = run_dir / "failures" / "head.txt"
    lost_head = ray_cluster.address
    try:
        proc = _train_on(ray_cluster, _endless(run_dir) + ["--config.checkpoint.every_seconds=5"])
        try:
            _wait_for_training(run_dir, proc)
            manifest = run_dir / "checkpoints" / "learner" / "manifest.json"
            _until(
                lambda: manifest.exists() and _last_row(evaluator)["env_steps"] > 0,
                proc,
                "a checkpoint and env steps",
            )
            # The GCS first: a GCS that outlived the launcher would end its host actors
            # at once (their owner died), which is not what a lost machine does.
            lost_at = time.time()
            ray_cluster.lose_head()
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate(timeout=60)
        learner_out = run_dir / "logs" / "nodes" / "learner" / "0"

        def final_checkpoint():  # its loop ended, or a thread wrote it (a stuck loop)
            text = learner_out.read_text()[-5000:]
            return "learner: stopped after" in text or "final checkpoint written" in text

        deadline = time.time() + 90
        while time.time() < deadline and not (report.exists() and final_checkpoint()):
            time.sleep(0.5)
        seen_after = time.time() - lost_at
    finally:
        ray_cluster.new_cluster()
    text = report.read_text() if report.exists() else ""
    assert text.startswith(
        f"the Ray head was lost (the launcher and Ray's control service, GCS at {lost_head})"
    ), text
    assert f"--resume={run_dir} --lp_launch_type=ray" in text, text
    assert final_checkpoint(), learner_out.read_text()[-3000:]

    heard = json.loads((run_dir / "checkpoints" / "counter.json").read_text())
    rows_before, elapsed = len(_rows(evaluator)), _last_row(evaluator)["elapsed"]
    proc = _train_on(
        ray_cluster, [f"--resume={run_dir}", f"--config.budget.seconds={elapsed + 20:.0f}"]
    )
    out = _finish(proc, timeout_s=400)
    assert proc.returncode == 0, out[-4000:]
    assert not report.exists()  # the resumed run reports its own outcome
    result = json.loads((run_dir / "result.json").read_text())
    assert result["stop_reason"] == "time_budget", result
    for name in ("env_steps", "episodes", "param_version"):
        assert result["counts"][name] >= heard[name], (name, heard, result["counts"])
    resumed = _rows(evaluator)[rows_before:]
    assert resumed, out[-4000:]
    for name in ("env_steps", "episodes", "param_version"):
        values = [r[name] for r in resumed]
        assert values[0] >= heard[name] and values == sorted(values), (name, heard[name], values)
    print(f"head lost: report and the learner's final checkpoint {seen_after:.1f} s after; {text}")
    for name in ("env_steps", "episodes", "param_version"):
        print(f"{name}: the counter's last {heard[name]:.0f}, resumed from {resumed[0][name]:.0f}")
    _nothing_left_on(ray_cluster, proc)


def _actors_at(run_dir) -> dict:
    """{actor name: its Ray node} as the placement file says now."""
    where = json.loads((run_dir / hosts.PLACEMENT_FILE).read_text())
    return {n: w["ray_node"] for n, w in where.items() if n.startswith("actor/")}


@pytest.mark.slow
@pytest.mark.cluster
def test_actors_scaled_2_to_4_to_1_during_a_ray_run(ray_cluster, tmp_path):
    """launch/scale.py against a live Ray run: the added actors are placed by the actor
    group's options (spread over the workers), act with the learner's latest params and
    their own exploration; the removed ones end their write (exit 0); a count the
    cluster cannot hold is refused (exit 2); nothing restarts or fails."""
    run_dir = tmp_path / "run"
    args = _endless(run_dir) + [
        "--config.num_actors=2",
        "--config.log.every_seconds=0.5",
        "--config.actor.epsilon_spread=7.0",
    ]
    with _training(ray_cluster, args) as proc:
        output = _Output(proc)
        _wait_for_training(run_dir, proc)
        _until(lambda: _acting(run_dir, 1, 0) and _env_steps(run_dir), proc, "two actors acting")
        refused = _scale(run_dir, "--actors=5")
        assert refused.returncode == 2, refused
        assert (
            "config.num_actors=5 x config.ray.actor_cpus=1.0 = 5 CPUs, but the Ray cluster "
            "fits 4" in refused.stderr
        ), refused.stderr

        asked = time.time()
        grown = _scale(run_dir, "--actors=4")
        assert grown.returncode == 0, grown.stderr
        assert "actors 2 -> 4; added actor/2, actor/3" in grown.stdout, grown.stdout
        placed = _actors_at(run_dir)
        assert sorted(placed.values()) == sorted([ray_cluster.learner, ray_cluster.other] * 2)
        _until(lambda: _acting(run_dir, 2, asked) and _acting(run_dir, 3, asked), proc, "added")
        _until(_grows(run_dir), proc, "env steps with 4 actors")
        for actor in (2, 3):  # the learner's latest params, its own exploration
            first = next(
                r for r in _supervised_rows(run_dir, f"actor_{actor}") if r["time"] > asked
            )
            assert first["param_version"] > 0, first
        spread = {
            r["epsilon"] for a in range(4) for r in _supervised_rows(run_dir, f"actor_{a}")[-1:]
        }
        assert len(spread) >= 3, spread

        shrunk = _scale(run_dir, "--actors=1")
        assert shrunk.returncode == 0, shrunk.stderr
        assert "actors 4 -> 1; removed actor/3, actor/2, actor/1" in shrunk.stdout, shrunk.stdout
        _until(
            lambda: all(
                f"actor/{i} removed: exited with code 0" in output.text() for i in (1, 2, 3)
            ),
            proc,
            "the removed actors ending their write",
        )
        assert list(_actors_at(run_dir)) == ["actor/0"]
        _until(_grows(run_dir), proc, "env steps with actor/0 alone")
        proc.send_signal(signal.SIGINT)
        out = output.finish(proc)
    assert proc.returncode == 130, out[-4000:]
    result = json.loads((run_dir / "result.json").read_text())
    assert result["restarts"] == [] and result["failures"] == {}, result
    changes = scaling.history(str(run_dir))
    assert [(c["cause"], c["before"], c["actors"], bool(c["error"])) for c in changes] == [
        ("launch", 0, 2, False),
        ("request", 2, 2, True),  # 5: refused
        ("request", 2, 4, False),
        ("request", 4, 1, False),
    ], changes
    steps = [r["env_steps"] for r in _rows(run_dir / "logs" / "evaluator.csv")]
    assert steps == sorted(steps) and steps[-1] > steps[0], steps
    assert not list((run_dir / "tmp").glob("launch-*"))  # the work directory went with it
    _nothing_left_on(ray_cluster, proc)
    config = rundir.load_config(str(run_dir))  # --resume takes the current count
    assert config.num_actors == 2
    assert launcher._scaled_count(config, str(run_dir), "ray") is None
    assert config.num_actors == 1


@pytest.mark.slow
@pytest.mark.cluster
def test_actors_follow_the_cluster_as_a_worker_leaves_and_comes_back(ray_cluster, tmp_path):
    """--config.ray.actors=auto: one actor per CPU of the two workers (4); the second
    worker's machine goes down: its actors are removed, not placed again (4 -> 2); it
    comes back as a new Ray node: two actors are added there (2 -> 4). Each change is a
    line of actors.log of cause "cluster", and env steps grow after each."""
    run_dir = tmp_path / "run"
    args = _endless(run_dir) + ["--config.ray.actors=auto", "--config.log.every_seconds=0.5"]
    try:
        with _training(ray_cluster, args) as proc:
            output = _Output(proc)
            _wait_for_training(run_dir, proc)
            launched = _actors_at(run_dir)
            assert sorted(launched) == [f"actor/{i}" for i in range(4)], launched
            _until(lambda: _env_steps(run_dir), proc, "env steps")
            gone = ray_cluster.other
            left = sorted(n for n, node in launched.items() if node == gone)
            ray_cluster.lose(gone)
            _until(
                lambda: "actors 4 -> 2 (the cluster changed)" in output.text(),
                proc,
                "the actors of the lost machine removed",
            )
            _until(_grows(run_dir, 2000), proc, "env steps with 2 actors")
            ray_cluster.restore()  # the worker back, as a new Ray node
            back = time.time()
            _until(
                lambda: "actors 2 -> 4 (the cluster changed)" in output.text(),
                proc,
                "actors added on the machine that came back",
            )
            after = _actors_at(run_dir)
            assert sorted(after) == [f"actor/{i}" for i in range(4)], after
            assert sorted(n for n, node in after.items() if node == ray_cluster.other) == left
            _until(
                lambda: all(_acting(run_dir, int(n[-1]), back) for n in left),
                proc,
                "the added actors acting",
            )
            proc.send_signal(signal.SIGINT)
            out = output.finish(proc)
    finally:
        ray_cluster.restore()
    assert proc.returncode == 130, out[-4000:]
    changes = scaling.history(str(run_dir))
    assert [(c["cause"], c["before"], c["actors"]) for c in changes] == [
        ("launch", 0, 4),
        ("cluster", 4, 2),
        ("cluster", 2, 4),
    ], changes
    assert sorted(changes[1]["removed"]) == left and sorted(changes[2]["added"]) == left
    result = json.loads((run_dir / "result.json").read_text())
    assert result["failures"] == {}, result
    # Removed, not placed again: an actor restarts only as a holder of a moved node's
    # address (a counter or evaluator on that machine moves as always).
    actor_restarts = [r for r in result["restarts"] if r["node"].startswith("actor/")]
    assert all(" moved to host " in r["cause"] for r in actor_restarts), actor_restarts
    rows = _rows(run_dir / "logs" / "evaluator.csv")
    steps = [r["env_steps"] for r in rows]
    assert steps == sorted(steps) and steps[-1] > steps[0], steps
    _nothing_left_on(ray_cluster, proc)


def _endless(run_dir):
    return [
        "--config=configs/dqn.py",
        f"--config.run_dir={run_dir}",
        *PLACE,
        "--config.evaluator.target_success=0",
        "--config.budget.env_steps=0",
        "--config.budget.seconds=300",
    ]


@pytest.mark.slow
@pytest.mark.cluster
def test_a_killed_node_is_reported_with_its_host_and_stops_the_program(ray_cluster, tmp_path):
    run_dir = tmp_path / "run"
    proc = _train_on(ray_cluster, _endless(run_dir) + ["--fail_fast"])  # no restarts
    where = _wait_for_training(run_dir, proc)
    psutil.Process(where["actor/1"]["pid"]).kill()
    out = _finish(proc)
    assert proc.returncode == 1, out[-4000:]
    host = where["actor/1"]
    assert "node failure, the program was stopped: actor/1 exited with code -9" in out, out[-4000:]
    assert f"on host {host['hostname']} ({host['ip']}, Ray node {host['ray_node'][:12]})" in out
    assert "exited with code -9" in (run_dir / "failures" / "actor_1.txt").read_text()
    _nothing_left_on(ray_cluster, proc)


# SIGTERM (`kill <driver pid>`) here; Ctrl-C (SIGINT) ends both fault runs above, which
# check the same (exit 130, a "stopped" result, nothing left).
@pytest.mark.slow
@pytest.mark.cluster
def test_a_sigterm_to_the_driver_stops_every_node_on_every_ray_node(ray_cluster, tmp_path):
    run_dir = tmp_path / "run"
    proc = _train_on(ray_cluster, _endless(run_dir))
    _wait_for_training(run_dir, proc)
    signalled = time.time()
    proc.send_signal(signal.SIGTERM)
    out = _finish(proc)
    assert proc.returncode == 130, out[-4000:]
    result = json.loads((run_dir / "result.json").read_text())
    assert result["stop_reason"] == "stopped"  # the evaluator stopped cleanly and reported
    # The learner stopped before the replay: its final checkpoint holds Reverb's tables.
    sealed = (run_dir / "checkpoints" / "replay-kept").glob("*/distrl.json")
    assert any(p.stat().st_mtime > signalled for p in sealed), out[-4000:]
    _nothing_left_on(ray_cluster, proc)


CLUSTER_BAD_INPUTS = [
    (
        ["--config.ray.replay_resource=tpu_host"],
        "config.ray.replay_resource='tpu_host': no Ray node has that resource",
    ),
    (
        ["--config.num_actors=5"],
        "config.num_actors=5 x config.ray.actor_cpus=1.0 = 5 CPUs, but the Ray cluster fits 4",
    ),
    (
        ["--config.ray.learner_device=gpu"],
        "config.ray.learner_device='gpu', but no Ray node has a GPU",
    ),
]


@pytest.mark.slow
@pytest.mark.cluster
@pytest.mark.parametrize(
    "args,message", CLUSTER_BAD_INPUTS, ids=[a[0] for a, _ in CLUSTER_BAD_INPUTS]
)
def test_a_program_the_cluster_cannot_hold_is_refused_before_any_node_starts(
    ray_cluster, tmp_path, args, message
):
    run_dir = tmp_path / "run"
    proc = _train_on(ray_cluster, ["--config=configs/dqn.py", f"--config.run_dir={run_dir}"] + args)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 2, out[-2000:]
    assert message in out and "Traceback" not in out, out[-2000:]
    assert not run_dir.exists()  # nothing written: the same command can be fixed and rerun
    _nothing_left_on(ray_cluster, proc)


# Fast checks of the launcher's pure parts; no cluster.


def test_host_port_address_formats_ipv4_and_ipv6_hosts():
    assert staging.HostPortAddress("10.0.0.2", 4321).build() == "10.0.0.2:4321"
    assert staging.HostPortAddress("fd00::2", 4321).build() == "[fd00::2]:4321"
    assert lp_address.get_port_from_address("[fd00::2]:4321") == 4321


def test_placement_options_follow_the_config():
    config = load_config("dqn")
    config.ray.learner_resource = "gpu_box"
    assert placement.placement_options("actor", config, True) == dict(
        num_cpus=1.0, scheduling_strategy="SPREAD"
    )
    assert placement.placement_options("learner", config, True) == dict(
        num_cpus=0, resources={"gpu_box": 0.001}, num_gpus=1
    )
    assert placement.placement_options("learner", config, False)["num_gpus"] == 0
    config.ray.learner_device = "cpu"
    assert placement.placement_options("learner", config, True)["num_gpus"] == 0
    assert placement.placement_options("evaluator", config, True) == dict(num_cpus=0)


def test_check_fits_counts_actors_per_node():
    config = load_config("dqn")
    config.num_actors, config.ray.actor_cpus = 3, 2.0
    nodes = [{"CPU": 3.0}, {"CPU": 3.0}]  # one 2-CPU actor per node
    with pytest.raises(ConfigError, match="fits 2 such actors"):
        placement.check_fits(config, nodes)
    config.num_actors = 2
    placement.check_fits(config, nodes)
    config.ray.actor_cpus = 4.0
    with pytest.raises(ConfigError, match="largest Ray node has 3 CPUs"):
        placement.check_fits(config, nodes)


def test_a_run_that_follows_the_cluster_takes_one_actor_per_slot_within_its_bounds():
    config = load_config("dqn")
    config.ray.actors, config.ray.actor_cpus = "auto", 2.0
    nodes = [{"CPU": 0.0}, {"CPU": 5.0}, {"CPU": 4.0}]  # 2 + 2 slots: 1 CPU left over
    assert placement.actor_slots(config, nodes) == 4
    assert placement.follow_count(config, nodes) == 4
    config.ray.max_actors = 3
    assert placement.follow_count(config, nodes) == 3
    config.ray.min_actors, config.ray.max_actors = 5, 0
    with pytest.raises(ConfigError, match="fits 4 actors .*, fewer than config.ray.min_actors=5"):
        placement.follow_count(config, nodes)
    config.ray.min_actors = 1
    with pytest.raises(ConfigError, match="fits 0 actors"):  # no node holds one
        placement.follow_count(config, [{"CPU": 1.0}, {"CPU": 1.0}])


def test_stop_signals_are_noted_not_raised_and_the_handlers_restored():
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    for sig in before:
        with stopping.stop_signals_noted() as signalled:
            assert not signalled.is_set()
            os.kill(os.getpid(), sig)  # no KeyboardInterrupt: the handler only notes it
            deadline = time.time() + 10
            while not signalled.is_set() and time.time() < deadline:
                time.sleep(0.01)
            assert signalled.is_set(), sig
        assert {s: signal.getsignal(s) for s in before} == before


def test_check_address_fails_fast():
    with pytest.raises(ConfigError, match="valid: HOST:PORT"):
        cluster_lib.check_address("head-without-port")
    start = time.time()
    with pytest.raises(LaunchError, match="no Ray cluster answers at --ray_address=127.0.0.1:1"):
        cluster_lib.check_address("127.0.0.1:1")
    assert time.time() - start < 10


def test_holders_are_the_nodes_whose_handles_point_to_a_node(tmp_path):
    """Who must restart with a moved node's new address: Launchpad's handle graph."""
    program = topology.make_program(
        experiment_lib.make(load_config("dqn")), str(tmp_path), time.time()
    )
    staged = staging.stage(program)
    holders = {s.name: [h.name for h in staging.holders(staged, s)] for s in staged}
    users = ["learner", "actor/0", "actor/1", "evaluator"]
    assert holders == {
        "replay": users,
        "counter": users,
        "learner": users[1:],
        "actor/0": [],
        "actor/1": [],
        "evaluator": [],
    }
