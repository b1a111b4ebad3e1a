"""A Ray cluster whose worker nodes are separate network hosts, all on this machine.

Each worker Ray node runs in its own Linux network namespace with its own address
on a private bridge: its loopback is its own, so a handle that resolved to
"localhost" or to the wrong machine's address could not connect. The head runs in
this namespace on the bridge's address (so the launcher, started here, is on the
head's Ray node). Needs root and iproute2's `ip`; `available()` says whether both
are there. Every process started is in a session of its own and is killed on
`shutdown()`, which also deletes the namespaces and the bridge. `lose_worker` takes a
worker machine down whole (every process in its namespace SIGKILLed at once) and
`restart_worker` brings it back as a new Ray node. `cut_link` takes a worker's network
link down for a while (every process keeps running; packets to and from it are
dropped, as on a pulled cable) and brings it up again.
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import leftovers
import psutil

_RAY = os.path.join(os.path.dirname(sys.executable), "ray")
_RAY_DIR = "/tmp/ray"  # Ray's default temp dir


def available() -> bool:
    return os.geteuid() == 0 and shutil.which("ip") is not None


def _ip(*args, netns=None):
    prefix = ["ip", "netns", "exec", netns] if netns else []
    subprocess.run(prefix + ["ip", *args], check=True, capture_output=True, text=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def _taken(kind: str) -> str:
    """`ip` 's list of links, namespaces or IPv4 addresses, as text to search."""
    args = {"link": ["-o", "link"], "netns": ["netns", "list"], "addr": ["-o", "-4", "addr"]}[kind]
    return subprocess.run(["ip", *args], capture_output=True, text=True).stdout


class NetnsRayCluster:
    """head: Ray node args of the head; workers: one dict of `ray start` args per worker.

    Each cluster takes names (bridge, namespaces) and a /24 that nothing on this machine
    uses when it is made, so that several may exist at once (a test's own beside a
    module's shared one, or another pytest worker's), and `shutdown` deletes only what
    this one made."""

    _made = 0  # clusters made by this process so far

    def __init__(self, head: dict, workers: list):
        NetnsRayCluster._made += 1
        links, namespaces, addresses = _taken("link"), _taken("netns"), _taken("addr")
        for n in range(NetnsRayCluster._made, NetnsRayCluster._made + 26):
            tag = f"dr{os.getpid() % 100000}{chr(ord('a') + n % 26)}"
            if f" {tag}" not in links and tag not in namespaces:
                break
        self._bridge = f"{tag}b"
        self._namespaces = [f"{tag}n{i}" for i in range(len(workers))]
        octet = 100 + os.getpid() % 150  # a /24 of our own, away from common ranges
        subnet = next(
            f"10.{(octet + k // 100) % 250 + 1}.{100 + k % 100}"
            for k in range(NetnsRayCluster._made, 10_000)
            if f"inet 10.{(octet + k // 100) % 250 + 1}.{100 + k % 100}." not in addresses
        )
        self.head_ip = f"{subnet}.1"
        self.worker_ips = [f"{subnet}.{11 + i}" for i in range(len(workers))]
        self._head_args, self._worker_args = head, workers
        self._procs = []
        self._workers = {}  # worker index -> its current `ray start` process
        self._lost = []  # `ray start` processes of lost workers: their exit is expected
        self._log_dir = tempfile.mkdtemp(prefix=f"{tag}-")
        self._made_links, self._made_namespaces = [], []  # what `shutdown` deletes
        self.address = None

    def start(self) -> "NetnsRayCluster":
        """Starts the network and the Ray nodes; this process stays connected as a driver."""
        import ray  # noqa: PLC0415

        if ray.is_initialized():  # its shutdown would disconnect the other cluster's driver
            raise RuntimeError("this process is already a Ray driver; ray.shutdown() first")
        try:
            self._network()
            port = _free_port()
            self.address = f"{self.head_ip}:{port}"
            leftovers.record("ray", self.address)
            self._ray_start(
                None,
                [
                    "--head",
                    f"--port={port}",
                    f"--node-ip-address={self.head_ip}",
                    "--include-dashboard=false",
                    *self._flags(self._head_args),
                ],
            )
            self._wait_for_head()
            ray.init(address=self.address)  # this process's driver, to watch the cluster
            os.makedirs(_RAY_DIR, exist_ok=True)  # the mount point of the workers' tmpfs
            for i in range(len(self._worker_args)):
                self._start_worker(i)
            self._wait_for_nodes(1 + len(self._worker_args))
        except BaseException:
            self.shutdown()
            raise
        return self

    def _network(self) -> None:
        _ip("link", "add", self._bridge, "type", "bridge")
        self._made_links.append(self._bridge)
        _ip("addr", "add", f"{self.head_ip}/24", "dev", self._bridge)
        _ip("link", "set", self._bridge, "up")
        for i, (ns, ip) in enumerate(zip(self._namespaces, self.worker_ips)):
            veth = f"{self._bridge}v{i}"
            _ip("netns", "add", ns)
            self._made_namespaces.append(ns)
            leftovers.record("netns", ns)
            _ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
            _ip("link", "set", veth, "master", self._bridge, "up")
            _ip("addr", "add", f"{ip}/24", "dev", "eth0", netns=ns)
            _ip("link", "set", "eth0", "up", netns=ns)
            _ip("link", "set", "lo", "up", netns=ns)

    def _start_worker(self, i: int) -> None:
        ip, args = self.worker_ips[i], self._worker_args[i]
        self._ray_start(
            self._namespaces[i],
            [f"--address={self.address}", f"--node-ip-address={ip}", *self._flags(args)],
        )
        self._workers[i] = self._procs[-1]

    def _in_namespace(self, i: int) -> list[int]:
        out = subprocess.run(
            ["ip", "netns", "pids", self._namespaces[i]], capture_output=True, text=True
        ).stdout
        return [int(pid) for pid in out.split()]

    def lose_worker(self, i: int, timeout_s: float = 20.0) -> None:
        """Worker `i`'s machine goes down: every process in its network namespace (its
        `ray start`, raylet, Ray workers and the nodes they run) is SIGKILLed, again
        until none is left (one may fork meanwhile). No orderly exit: the cluster
        learns it as it would a dead machine, by its own failure detection."""
        self._lost.append(self._workers[i])
        deadline = time.time() + timeout_s
        while pids := self._in_namespace(i):
            if time.time() > deadline:
                raise RuntimeError(f"processes left in {self._namespaces[i]}: {pids}")
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.1)
        for p in self._lost:
            p.wait()

    def lose_head(self, timeout_s: float = 20.0) -> None:
        """The head machine goes down: every process of its `ray start` session (the
        GCS, its raylet, its Ray workers and the nodes they run) is SIGKILLed, again
        until none is left. The workers' Ray processes end themselves once the GCS has
        not answered for 60 s; `shutdown` ends what is left."""
        from conftest import session_processes  # noqa: PLC0415 - the suite's helper

        head = self._procs[0]
        self._lost.append(head)
        deadline = time.time() + timeout_s
        while procs := session_processes(head.pid):
            if time.time() > deadline:
                raise RuntimeError(f"processes left in the head's session: {procs}")
            for p in procs:
                try:
                    p.kill()
                except psutil.NoSuchProcess:
                    pass
            time.sleep(0.1)
        head.wait()

    def cut_link(self, i: int, seconds: float) -> None:
        """Worker `i`'s link is down for `seconds` (its interface in its namespace), then
        up again with its address and route; nothing in the namespace is touched."""
        ns = self._namespaces[i]
        _ip("link", "set", "eth0", "down", netns=ns)
        try:
            time.sleep(seconds)
        finally:
            _ip("link", "set", "eth0", "up", netns=ns)

    def restart_worker(self, i: int, timeout_s: float = 90.0) -> None:
        """Worker `i` comes back (after `lose_worker`) as a new Ray node on its address,
        once the cluster has marked the old one dead (needs a connected driver)."""
        import ray  # noqa: PLC0415

        ip = self.worker_ips[i]
        deadline = time.time() + timeout_s
        while any(n["Alive"] and n["NodeManagerAddress"] == ip for n in ray.nodes()):
            if time.time() > deadline:
                raise RuntimeError(f"the Ray cluster still counts {ip} alive")
            time.sleep(0.5)
        self._start_worker(i)
        self._wait_for_nodes(1 + len(self._worker_args), timeout_s)

    @staticmethod
    def _flags(args: dict) -> list:
        flags = [f"--num-cpus={args.get('num_cpus', 0)}"]
        if args.get("resources"):
            flags.append(f"--resources={json.dumps(args['resources'])}")
        return flags

    def _ray_start(self, netns, args) -> None:
        prefix = []
        if netns:
            # A worker machine has its own Ray directory (sockets, session files): a
            # tmpfs over /tmp/ray, private to the namespace's mount table that
            # `ip netns exec` makes. The rest of the file system stays shared.
            prefix = [
                "ip",
                "netns",
                "exec",
                netns,
                "sh",
                "-c",
                f'mount -t tmpfs tmpfs {_RAY_DIR} && exec "$0" "$@"',
            ]
        env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0")
        log = open(os.path.join(self._log_dir, f"ray-start-{len(self._procs)}.log"), "w")
        with log:
            self._procs.append(
                subprocess.Popen(
                    prefix + [_RAY, "start", "--block", *args],
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )

    def _wait_for_head(self, timeout_s: float = 60.0) -> None:
        host, port = self.address.rsplit(":", 1)
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            self._check_running()
            try:
                socket.create_connection((host, int(port)), timeout=1).close()
                return
            except OSError:
                time.sleep(0.3)
        raise RuntimeError(f"the Ray head at {self.address} did not start")

    def _wait_for_nodes(self, count: int, timeout_s: float = 90.0) -> None:
        """Needs this process connected as a driver (ray.init)."""
        import ray  # noqa: PLC0415

        deadline = time.time() + timeout_s
        while len([n for n in ray.nodes() if n["Alive"]]) < count:
            self._check_running()
            if time.time() > deadline:
                raise RuntimeError(f"the Ray cluster at {self.address} did not reach {count} nodes")
            time.sleep(0.5)

    def _check_running(self) -> None:
        for i, p in enumerate(self._procs):
            if p.poll() is not None and p not in self._lost:
                with open(os.path.join(self._log_dir, f"ray-start-{i}.log")) as f:
                    tail = f.read()[-3000:]
                raise RuntimeError(f"`ray start` exited with {p.returncode}: {p.args}\n{tail}")

    def node_ids(self) -> dict:
        """{ip: Ray node id} of the alive nodes (needs a connected driver)."""
        import ray  # noqa: PLC0415

        return {n["NodeManagerAddress"]: n["NodeID"] for n in ray.nodes() if n["Alive"]}

    def sessions(self) -> list[int]:
        """The session ids of every process of this cluster (each `ray start` leads one:
        raylets, GCS, workers and the node processes they start)."""
        return [p.pid for p in self._procs]

    def shutdown(self) -> None:
        import ray  # noqa: PLC0415

        ray.shutdown()
        sessions = self.sessions()
        for p in self._procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        deadline = time.time() + 15
        while time.time() < deadline and any(p.poll() is None for p in self._procs):
            time.sleep(0.2)
        for proc in psutil.process_iter(["pid"]):  # raylets, GCS, workers: all in these sessions
            try:
                if os.getsid(proc.pid) in sessions:
                    proc.kill()
            except (ProcessLookupError, psutil.NoSuchProcess):
                pass
        for p in self._procs:
            if p.poll() is None:
                p.kill()
            p.wait()
        for ns in self._made_namespaces:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        for link in self._made_links:
            subprocess.run(["ip", "link", "del", link], capture_output=True)
        shutil.rmtree(self._log_dir, ignore_errors=True)
        self._forget_head()

    def _forget_head(self) -> None:
        """Removes what `ray stop` would have of this head's files: `ray_current_cluster`
        (a later plain `ray.init()` on this machine would follow it to the dead head) and
        its session directories, named after the `ray start` process that made each."""
        current = os.path.join(_RAY_DIR, "ray_current_cluster")
        try:
            with open(current) as f:
                if f.read().strip() == self.address:
                    os.remove(current)
        except FileNotFoundError:
            pass
        ours = tuple(f"_{p.pid}" for p in self._procs)
        for name in os.listdir(_RAY_DIR) if os.path.isdir(_RAY_DIR) else []:
            if name.startswith("session_2") and name.endswith(ours):
                shutil.rmtree(os.path.join(_RAY_DIR, name), ignore_errors=True)
        latest = os.path.join(_RAY_DIR, "session_latest")
        if os.path.islink(latest) and not os.path.exists(latest):
            os.remove(latest)  # it pointed at one of them
