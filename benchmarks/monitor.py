"""The stage benchmarks' stopwatch: counter and Reverb-table snapshots over windows.

Runs in the Launchpad launcher process (addresses are bound there before the nodes
start, so handles dereference to live clients), which keeps the measured program's
own process count unchanged. A plan is a list of phases; each phase waits for
counts to move, warms up, records snapshots every 0.2 s over a window (stretched
while the timed count has not moved twice), and may open or close a gate (a file
that `benchmarks.nodes` nodes watch). Every poll also notes when each count and
each watched file was first seen (`first_seen`, seconds since this process
started: the command), which gives the start-up figures; `node_memory` reads the
memory of the program's node processes and `node_cpu` their CPU time, from which
each phase gets the cores each node used in its window (and `machine_busy` the
cores the whole machine used, other work included).
"""

import os
import time

import psutil

from benchmarks import tables

POLL_S = 0.2
STRETCH = 4  # a window's longest, in windows, while its count has not moved twice


class Monitor:
    """Follows a plan of phases against a counter client and a Reverb client.

    A phase is a dict: `name`; `replay` (which Reverb client's table to record);
    `touch` (a gate file to create first, or None);
    `wait_for` (counter keys that must all grow past their value at the phase's
    start before timing starts, at most `timeout` s); `warmup` and `window`
    (seconds); `after` (a gate file to create when the window ends) with
    `then_quiet` (a count that must then stop moving, e.g. env_steps once the
    actor was told to stop); `watch` ({name: path}, files whose first appearance
    is noted from the start of the run).
    """

    def __init__(self, counter, replays, gate_dir: str, log_dir: str = ""):
        # Launchpad handles, dereferenced on use and again after a failed call: a gRPC
        # channel that failed while its server was starting backs off for up to
        # minutes, which would hide when the server came up.
        self._handles = dict(replays, counter=counter)  # a phase names its replay
        self._clients = {}
        self._gate_dir = gate_dir
        self._log_dir = log_dir  # the nodes' output files: names them for `node_cpu`
        self._watch = {}  # name -> path whose first appearance is noted (phases' `watch`)
        self._origin = psutil.Process().create_time()
        self.first_seen = {}  # count or watched name -> seconds after the command

    def run(self, plan) -> dict:
        """{'phases': {name: {'start_delay', 'snapshots'} | {'error'}}, 'error': str | None,
        'first_seen': {count or watched name: seconds after the command}}."""
        phases, error = {}, None
        for phase in plan:
            self._watch.update(phase.get("watch", {}))
        try:
            for phase in plan:
                phases[phase["name"]] = self._run_phase(phase)
        except Exception as err:  # noqa: BLE001 - keep what was measured
            error = f"{type(err).__name__}: {err}"
        return {"phases": phases, "error": error, "first_seen": self.first_seen}

    def _run_phase(self, phase) -> dict:
        self.phase = phase  # also for subclasses that act during a window
        baseline = self._counts()
        if phase.get("touch"):
            self._touch(phase["touch"])
        started, timeout = time.time(), phase.get("timeout", 120)
        if not self._wait_for(phase["wait_for"], baseline, timeout):
            if phase.get("after"):  # stop it anyway: a late start must not run on into
                self._touch(phase["after"])  # the next phases' windows
            return {"error": f"{phase['wait_for']} did not move in {timeout} s"}
        ready = time.time()
        time.sleep(phase["warmup"])
        cpu, busy, start = node_cpu(self._log_dir), machine_busy(), time.time()
        snapshots = self._record(phase["window"], phase["replay"])
        elapsed = time.time() - start
        cores = cores_between(cpu, node_cpu(self._log_dir), elapsed)
        if phase.get("after"):
            self._touch(phase["after"])
            self._wait_quiet(phase["then_quiet"])
        return {
            "start_delay": ready - started,
            "snapshots": snapshots,
            "cores": cores,
            "machine_cores": (machine_busy() - busy) / elapsed,  # every process's, ours too
        }

    def _touch(self, name: str) -> None:
        open(os.path.join(self._gate_dir, name), "w").close()

    def _counts(self, replay: str = "") -> dict:
        """The counter's counts, plus the table counts of Reverb server `replay` as
        table_*; a server that does not answer (still starting) is left out."""
        counts = self._call("counter", lambda client: client.get_counts())
        if replay:
            table = self._call(replay, tables.table_counts)
            counts.update({f"table_{k}": v for k, v in table.items()})
        self._note_first(counts)
        return counts

    def _call(self, name: str, fn) -> dict:
        """fn(client of `name`), or {} (and a fresh client next time) if it fails."""
        try:
            if name not in self._clients:
                self._clients[name] = self._handles[name].dereference()
            return fn(self._clients[name])
        except Exception:  # noqa: BLE001 - the server may still be starting
            self._clients.pop(name, None)
            return {}

    def _note_first(self, counts: dict) -> None:
        now = time.time() - self._origin
        for name, value in counts.items():
            if value and name != "counter_seconds":
                self.first_seen.setdefault(name, now)
        for name, path in self._watch.items():
            if name not in self.first_seen and os.path.exists(path):
                self.first_seen[name] = now

    def _wait_for(self, keys, baseline, timeout: float) -> bool:
        deadline = time.time() + timeout
        while time.time() < deadline:
            counts = self._counts(self.phase["replay"])
            if all(counts.get(k, 0) > baseline.get(k, 0) for k in keys):
                return True
            time.sleep(POLL_S)
        return False

    def _record(self, seconds: float, replay) -> list:
        """Snapshots every POLL_S for `seconds`, or longer (up to STRETCH times) until
        the phase's timed count has changed twice, which a rate needs
        (`rate_between_changes`): on a starved machine the counter can go unanswered,
        and a node unscheduled, for most of a short window."""
        key, snapshots, start = self.phase["wait_for"][0], [], time.time()
        while True:
            elapsed = time.time() - start
            moved = changes(snapshots, key) >= 2
            if elapsed >= seconds * STRETCH or (elapsed >= seconds and moved):
                return snapshots
            counts = self._counts(replay)
            if "table_inserts" in counts and "counter_seconds" in counts:  # else skip
                snapshots.append(dict(counts, time=time.time()))
            time.sleep(POLL_S)

    def _wait_quiet(self, key: str, quiet_s: float = 1.2, timeout: float = 20) -> None:
        last, since, deadline = None, time.time(), time.time() + timeout
        while time.time() < deadline:
            value = self._counts().get(key, 0)
            if value != last:
                last, since = value, time.time()
            elif time.time() - since > quiet_s:
                return
            time.sleep(POLL_S)


def changes(snapshots: list, key: str) -> int:
    """How many times `key` changed from one snapshot to the next."""
    values = [s.get(key, 0) for s in snapshots]
    return sum(a != b for a, b in zip(values, values[1:]))


def node_cpu(log_dir: str) -> dict:
    """{'<group>/<i>': CPU seconds (user + system, all threads) so far} of this
    process's node processes, known by their output file as in `node_memory`; {}
    without `log_dir`."""
    out = {}
    for proc in _descendants() if log_dir else ():
        try:
            name = os.path.relpath(os.readlink(f"/proc/{proc.pid}/fd/1"), log_dir)
            times = proc.cpu_times()
        except (psutil.Error, OSError):
            continue
        if _is_node(name):
            out[name] = times.user + times.system
    return out


def _descendants() -> list:
    """This process's children and theirs: a node forked by the preloaded parent
    (`distrl.program.zygote`) is a grandchild."""
    try:
        return psutil.Process().children(recursive=True)
    except psutil.Error:
        return []


def _is_node(name: str) -> bool:
    """Whether an output file's path under the log dir is a node's, `<group>/<i>` (the
    supervisor's own log, `launcher`, is its and the preloaded parent's)."""
    return "/" in name and not name.startswith("..")


def machine_busy() -> float:
    """CPU seconds every process of the machine has used so far (all but idle and I/O
    wait): with the program's own, what the other work on a shared host took."""
    times = psutil.cpu_times()
    return sum(times) - times.idle - getattr(times, "iowait", 0.0)


def cores_between(before: dict, after: dict, seconds: float) -> dict:
    """{node: cores it used on average} between two `node_cpu` readings, busiest
    first; nodes under 0.01 cores (idle) are left out."""
    used = {n: (after[n] - before[n]) / seconds for n in after if n in before and seconds > 0}
    return dict(sorted(((n, c) for n, c in used.items() if c >= 0.01), key=lambda x: -x[1]))


def node_memory(log_dir: str) -> dict:
    """{'<group>/<i>': {'rss_gb', 'hwm_gb', 'pss_gb', 'uss_gb'}} of this process's node
    processes, each known by its output file `<log_dir>/<group>/<i>` (the supervisor's
    output_to_files). hwm is the peak RSS (VmHWM); PSS splits shared pages among the
    processes sharing them (a forked node's with the preloaded parent too), USS
    counts only a process's own."""
    out = {}
    for proc in _descendants():
        name, memory = _named_memory(proc, log_dir)
        if memory is not None and _is_node(name):
            out[name] = memory
    return out


def session_memory(sid: int, nodes_dir: str) -> dict:
    """The same figures for every process of session `sid` (a `launch/train.py` run):
    its nodes by their output file under `nodes_dir` (`<run_dir>/logs/nodes`), the
    preloaded parent by its command line (its forks, the nodes, keep it) and the
    launcher (the session's leader)."""
    out = {}
    for proc in psutil.process_iter():
        try:
            if os.getsid(proc.pid) != sid:
                continue
        except OSError:
            continue
        name, memory = _named_memory(proc, nodes_dir)
        if memory is None:
            continue
        if name.startswith("..") or name == "launcher":  # not a node's output file
            try:
                preloaded = "zygote" in " ".join(proc.cmdline())
            except psutil.Error:
                continue
            name = "launcher" if proc.pid == sid else f"other/{proc.pid}"
            name = "preloaded parent" if preloaded and proc.pid != sid else name
        out[name] = memory
    return out


def _named_memory(proc, log_dir: str):
    """(its output file relative to `log_dir`, its memory figures), or (None, None)
    for a process gone or unreadable."""
    try:
        name = os.path.relpath(os.readlink(f"/proc/{proc.pid}/fd/1"), log_dir)
        info = proc.memory_full_info()
        with open(f"/proc/{proc.pid}/status") as f:
            hwm_kb = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
    except (psutil.Error, OSError, StopIteration):
        return None, None
    return name, {
        "rss_gb": info.rss / 2**30,
        "hwm_gb": hwm_kb / 2**20,
        "pss_gb": info.pss / 2**30,
        "uss_gb": info.uss / 2**30,
    }
