"""Stage 6, shared by every node: when to stop, how to stop the program, how a body ends.

The actor, learner and evaluator take a `lifecycle` from whoever builds them and
call only these methods on it:

- `should_stop(wait_seconds)`, `stop_flag()`, `stop_event()`: the program's stop;
- `request_stop()`: stops the whole program (every node), from any node;
- `in_own_process()`: the node is a process of its own, which ends with its body;
- `guard(name, run_dir)`: runs the node's body; an exception is written to
  `<run_dir>/failures/<name>.txt` (`distrl.records.failures`).

`InProcess` (a node's default) serves nodes built and driven by their caller, in the
caller's process (a test, a script): one stop event, set by `request_stop`, and a
guard that records a failure, stops, and raises it to the caller. Nodes that share
one `InProcess` stop together. The program (`distrl.program.topology`) gives its
nodes `distrl.program.lifecycle.LAUNCHPAD` instead: Launchpad's stop event and
`lp.stop()`, seen even in native code, and a guard that ends the node's process.
Nothing here imports Launchpad, so the node classes import and step without it.

`attempt()` is the same under every launcher: which restart of its node this
process is, from the environment its launcher sets.
"""

import contextlib
import os
import threading

from distrl.records import failures

ATTEMPT_ENV = "DISTRL_NODE_ATTEMPT"  # 0 for a node's first start, n for its n-th restart


def attempt() -> int:
    """0 in a node's first process, n in its n-th restart (set by its launcher)."""
    return int(os.environ.get(ATTEMPT_ENV, "0"))


class InProcess:
    """The lifecycle of nodes that run in their caller's process (see the module)."""

    def __init__(self):
        self._stop = threading.Event()

    def should_stop(self, wait_seconds: float = 0.0) -> bool:
        """True once a stop was requested; waits up to `wait_seconds` for it first."""
        return self._stop.wait(wait_seconds)

    def stop_flag(self):
        """`should_stop()` without waiting, for any thread."""
        return self._stop.is_set

    def stop_event(self) -> threading.Event:
        return self._stop

    def request_stop(self) -> None:
        self._stop.set()

    def in_own_process(self) -> bool:
        return False  # the caller's process outlives the node's body

    @contextlib.contextmanager
    def guard(self, name: str, run_dir: str):
        """Runs a node body; an exception is recorded, stops the others, and propagates."""
        try:
            yield
        except Exception as err:
            failures.record_exception(run_dir, name, err)
            self.request_stop()
            raise
