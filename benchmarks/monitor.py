"""The stage benchmarks' stopwatch: counter and Reverb-table snapshots over windows.

Runs in the Launchpad launcher process (addresses are bound there before the nodes
start, so handles dereference to live clients), which keeps the measured program's
own process count unchanged. A plan is a list of phases; each phase waits for
counts to move, warms up, records snapshots every 0.2 s over a window, and may
open or close a gate (a file that `benchmarks.nodes` nodes watch).
"""

import os
import time

from benchmarks import tables

POLL_S = 0.2


class Monitor:
    """Follows a plan of phases against a counter client and a Reverb client.

    A phase is a dict: `name`; `replay` (which Reverb client's table to record);
    `touch` (a gate file to create first, or None);
    `wait_for` (counter keys that must all grow past their value at the phase's
    start before timing starts, at most `timeout` s); `warmup` and `window`
    (seconds); `after` (a gate file to create when the window ends) with
    `then_quiet` (a count that must then stop moving, e.g. env_steps once the
    actor was told to stop).
    """

    def __init__(self, counter, replay_clients, gate_dir: str):
        self._counter = counter
        self._replays = replay_clients  # name -> reverb.Client; a phase names its own
        self._gate_dir = gate_dir

    def run(self, plan) -> dict:
        """{'phases': {name: {'start_delay', 'snapshots'} | {'error'}}, 'error': str | None}."""
        phases, error = {}, None
        try:
            for phase in plan:
                phases[phase["name"]] = self._run_phase(phase)
        except Exception as err:  # noqa: BLE001 - keep what was measured
            error = f"{type(err).__name__}: {err}"
        return {"phases": phases, "error": error}

    def _run_phase(self, phase) -> dict:
        self.phase = phase  # for subclasses that act during a window
        baseline = self._counts()
        if phase.get("touch"):
            self._touch(phase["touch"])
        started, timeout = time.time(), phase.get("timeout", 120)
        if not self._wait_for(phase["wait_for"], baseline, timeout):
            return {"error": f"{phase['wait_for']} did not move in {timeout} s"}
        ready = time.time()
        time.sleep(phase["warmup"])
        snapshots = self._record(phase["window"], self._replays[phase["replay"]])
        if phase.get("after"):
            self._touch(phase["after"])
            self._wait_quiet(phase["then_quiet"])
        return {"start_delay": ready - started, "snapshots": snapshots}

    def _touch(self, name: str) -> None:
        open(os.path.join(self._gate_dir, name), "w").close()

    def _counts(self) -> dict:
        try:
            return self._counter.get_counts()
        except Exception:  # noqa: BLE001 - the counter may still be starting
            return {}

    def _wait_for(self, keys, baseline, timeout: float) -> bool:
        deadline = time.time() + timeout
        while time.time() < deadline:
            counts = self._counts()
            if all(counts.get(k, 0) > baseline.get(k, 0) for k in keys):
                return True
            time.sleep(POLL_S)
        return False

    def _record(self, seconds: float, replay) -> list:
        snapshots, end = [], time.time() + seconds
        while time.time() < end:
            counts = self._counts()
            if not counts:  # no answer this time: skip rather than record zeros
                time.sleep(POLL_S)
                continue
            snap = dict(counts, time=time.time())
            snap.update({f"table_{k}": v for k, v in tables.table_counts(replay).items()})
            snapshots.append(snap)
            time.sleep(POLL_S)
        return snapshots

    def _wait_quiet(self, key: str, quiet_s: float = 1.2, timeout: float = 20) -> None:
        last, since, deadline = None, time.time(), time.time() + timeout
        while time.time() < deadline:
            value = self._counts().get(key, 0)
            if value != last:
                last, since = value, time.time()
            elif time.time() - since > quiet_s:
                return
            time.sleep(POLL_S)
