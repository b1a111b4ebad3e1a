"""The restart policy of both launchers (`config.restart`): whether a failed node starts
again, after how long, and the record of each restart.

A node's failures restarted so far are counted by its name; `max_per_node` bounds them
(0: the first failure ends the run) and the backoff doubles with each one. A restart is
listed (result.json's `restarts`, the final summary), and the node's failure report
moves to `failures/restarted/`, where it no longer ends the run. The Ray launcher also
restarts nodes that did not fail (the holders of a moved node's address): listed the
same way (`listed`), not counted against `max_per_node`. The launchers say what they
do in their own words; what they decide comes from here.
"""

import collections
import os
import time
from typing import NamedTuple

from distrl.records import failures

RESTARTED_DIR = "restarted"  # under failures/: reports of nodes that were restarted


def restart_delay(backoff_seconds: float, failures_before: int) -> float:
    """Seconds before a node starts again after its failure number `failures_before` + 1
    (0: its first): the backoff, doubled per earlier failure."""
    return backoff_seconds * 2**failures_before


class Restart(NamedTuple):
    """A failed node's start to come: after `delay` seconds, its `number`-th restart
    for a failure of `limit` allowed."""

    delay: float
    number: int
    limit: int

    def describe(self) -> str:
        """'restart 2 of 3'."""
        return f"restart {self.number} of {self.limit}"


class RestartPolicy:
    """`config.restart` applied to one launch begun at `began` (time.time()) in `run_dir`."""

    def __init__(self, restart_config, run_dir: str, began: float):
        self.max_per_node = restart_config.max_per_node
        self._backoff = restart_config.backoff_seconds
        self._run_dir = run_dir
        self._began = began
        self._failures = collections.Counter()  # node name -> its failures restarted
        self._starts = collections.Counter()  # node name -> its restarts listed, any cause
        self.restarts: list[dict] = []  # result.json's `restarts`, in order

    def after_failure(self, name: str, cause: str, **extra) -> Restart | None:
        """Decides on node `name`, whose failure report (first line `cause`) is written:
        its restart, listed (`listed`, with `extra` in its entry), or None once its
        failures restarted reached `max_per_node` (its report stays: the run ends)."""
        before = self._failures[name]
        if before >= self.max_per_node:
            return None
        self._failures[name] += 1
        restart = Restart(restart_delay(self._backoff, before), before + 1, self.max_per_node)
        self.listed(name, cause, restart.delay, **extra)
        return restart

    def listed(self, name: str, cause: str, delay: float, **extra) -> dict:
        """Lists a start of node `name` to come, in `delay` seconds, for `cause`: its
        failure report moves to failures/restarted/<name>-<n>.txt (n: its n-th restart);
        returns its entry in `restarts` (with `extra`)."""
        self._starts[name] += 1
        number = self._starts[name]
        report = os.path.join(
            self._run_dir,
            failures.FAILURES_DIR,
            RESTARTED_DIR,
            f"{name.replace('/', '_')}-{number}.txt",
        )
        os.makedirs(os.path.dirname(report), exist_ok=True)
        os.replace(failures.failure_path(self._run_dir, name), report)
        entry = {
            "node": name,
            "cause": cause,
            "restart": number,
            "at_seconds": round(time.time() - self._began, 1),
            "backoff_seconds": round(delay, 1),
            "report": report,
            **extra,
        }
        self.restarts.append(entry)
        return entry

    def attempt(self, name: str) -> int:
        """The start node `name` is at: 0 for its first, n after its n-th restart."""
        return self._starts[name]

    def forget(self, name: str) -> None:
        """Node `name` left the run (an actor removed): an actor added later under its
        name starts with no failures and no restarts."""
        self._failures.pop(name, None)
        self._starts.pop(name, None)
