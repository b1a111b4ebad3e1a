"""Stage 6 of the data flow, shared by every node: stop requests and failures.

Launchpad's `local_mp` launcher does not notice a node process that dies, so a
crashed node would leave the rest running until a budget nobody checks. Each node
therefore runs its body inside `guard(name, run_dir)`: an exception is written to
`<run_dir>/failures/<name>.txt` (the launcher reports it by name) and stops the
whole program.

Under `--lp_launch_type=ray` a node's stop request cannot signal a launcher on
another machine: `stop_via_file` (the program stopper `distrl.program.ray.cluster` gives each
node) touches the file its node host watches, and the launcher stops every node.
"""

import contextlib
import faulthandler
import os
import sys
import threading
import traceback

import launchpad as lp
from absl import logging
from launchpad import context as lp_context

from distrl.program.ray import STOP_FILE_ENV

FAILURES_DIR = "failures"


def should_stop(wait_seconds: float = 0.0) -> bool:
    """True once the program is stopping (budget, target, signal or failure).

    Waits up to `wait_seconds` for the stop first (0: answers at once).
    """
    return lp.wait_for_stop(wait_seconds)


def request_stop() -> None:
    """Stops the whole program (every node), from any node."""
    lp.stop()


# Launchpad kills a node 10 s after the stop; a node still running this long after it
# prints every thread's stack into its output first, to show where it was stuck.
STUCK_AFTER_STOP_S = 8.0


class _StuckWatch:
    """Arms faulthandler's stack dump when the stop begins; disarms when the body ends."""

    def __init__(self):
        self._lock = threading.Lock()
        self._done = False
        stop_event = lp.stop_event()  # the worker manager is this thread's, so fetch it here
        threading.Thread(target=self._arm, args=(stop_event,), name="stuck-watch",
                         daemon=True).start()

    def _arm(self, stop_event) -> None:
        stop_event.wait()
        with self._lock:
            if not self._done:
                faulthandler.dump_traceback_later(STUCK_AFTER_STOP_S, exit=False, file=sys.stderr)

    def disarm(self) -> None:
        with self._lock:
            self._done = True
            faulthandler.cancel_dump_traceback_later()


@contextlib.contextmanager
def guard(name: str, run_dir: str):
    """Runs a node body; on an exception, records it and stops the program."""
    watch = _StuckWatch()
    try:
        yield
    except Exception:
        text = traceback.format_exc()
        logging.error("node %s failed; stopping the program:\n%s", name, text)
        record_failure(run_dir, name, text)
        lp.stop()
        # A node process exits non-zero. Under test_mt the node is a thread of the
        # test process, and Launchpad's test harness answers a thread that raised by
        # SIGQUIT-killing that whole process 3 s later, unless the test's own cleanup
        # ran first (a race the failing-node test lost under load): the failure is
        # recorded and the program stopping, so the thread just ends.
        if lp_context.get_context().launch_type is not lp_context.LaunchType.TEST_MULTI_THREADING:
            raise
    finally:
        watch.disarm()


def stop_via_file() -> None:
    """Program stopper of a node launched on Ray: asks its node host to stop the program."""
    with open(os.environ[STOP_FILE_ENV], "w"):
        pass


def failure_path(run_dir: str, name: str) -> str:
    return os.path.join(run_dir, FAILURES_DIR, name.replace("/", "_") + ".txt")


def record_failure(run_dir: str, name: str, text: str) -> None:
    """Writes (replaces) the failure report of node `name`."""
    path = failure_path(run_dir, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def read_failures(run_dir: str) -> dict:
    """{node name: traceback text} of the nodes that failed in this run."""
    path = os.path.join(run_dir, FAILURES_DIR)
    if not os.path.isdir(path):
        return {}
    failures = {}
    for filename in sorted(os.listdir(path)):
        with open(os.path.join(path, filename)) as f:
            failures[filename[: -len(".txt")].replace("_", "/", 1)] = f.read()
    return failures
