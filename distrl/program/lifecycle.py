"""Stage 6 of the data flow, shared by every node: stop requests and failures.

Each node runs its body inside `guard(name, run_dir)`: an exception is written to
`<run_dir>/failures/<name>.txt`, whose first line names the cause ("raised
KeyError: 'x'") and the rest holds the traceback, and the node process exits
non-zero. The launcher that watches the node processes (`distrl.program.supervisor`
here, `distrl.program.ray.cluster` on Ray) then restarts it or stops the program,
and writes the report of a node that died without one (`record_exit`: a signal,
a native abort, an exit code). Under `test_mt` (threads) the guard stops the
program itself.

Under `--lp_launch_type=ray` a node's stop request cannot signal a launcher on
another machine: `stop_via_file` (the program stopper `distrl.program.ray.cluster` gives each
node) touches the file its node host watches, and the launcher stops every node.
"""

import contextlib
import os
import signal
import threading
import traceback

import launchpad as lp
from absl import logging
from launchpad import context as lp_context

from distrl import exits
from distrl.program import nodeproc
from distrl.program.nodeproc import ATTEMPT_ENV
from distrl.program.ray import STOP_FILE_ENV

FAILURES_DIR = "failures"


def should_stop(wait_seconds: float = 0.0) -> bool:
    """True once the program is stopping (budget, target, signal or failure).

    Waits up to `wait_seconds` for the stop first (0: answers at once).
    """
    return lp.wait_for_stop(wait_seconds)


def stop_flag():
    """`should_stop()` for any thread, e.g. a courier handler's (a node stepped by a test).

    Call it in the node's own thread (its constructor runs there): Launchpad's stop
    event is that thread's. Outside a program (a test constructing a node alone) the
    flag is never set.
    """
    try:
        return lp.stop_event().is_set
    except RuntimeError:  # no worker manager in this thread
        return threading.Event().is_set


def stop_event() -> threading.Event:
    """The program's stop event; fetch it in the node's main thread (its worker manager
    is that thread's) and wait on it in any other."""
    return lp.stop_event()


def request_stop() -> None:
    """Stops the whole program (every node), from any node."""
    lp.stop()


class _StopNotice:
    """Sets the stop event on SIGTERM or SIGINT even while the main thread is stuck.

    Launchpad's handler that sets the node's stop event is a Python signal handler,
    which runs only when the main thread executes Python: a main thread blocked in a
    native call (a Reverb sample, seen in the learner) never saw the stop, and
    nothing waiting on the event (the learner's final checkpoint) ran. The C-level
    handler writes each signal's number to the wakeup fd at once; a thread reads it.
    Only in a node process's main thread (not under test_mt, where nodes are threads).
    """

    def __init__(self):
        self._stop_event = lp.stop_event()  # the worker manager is this thread's
        if threading.current_thread() is not threading.main_thread():
            return
        read_fd, write_fd = os.pipe()
        os.set_blocking(write_fd, False)
        try:
            signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
        except ValueError:
            return
        threading.Thread(
            target=self._read, args=(read_fd,), name="stop-notice", daemon=True
        ).start()

    def _read(self, read_fd: int) -> None:
        stops = {signal.SIGTERM, signal.SIGINT}
        while True:
            data = os.read(read_fd, 64)
            if not data:
                return
            if stops & set(data):
                self._stop_event.set()


# A node process whose body raised must exit for its launcher to see it; a lingering
# non-daemon thread (a server, a client) must not keep it alive longer than this.
_EXIT_AFTER_FAILURE_S = 10.0


@contextlib.contextmanager
def guard(name: str, run_dir: str):
    """Runs a node body; on an exception, records it and ends the node (see the module)."""
    _StopNotice()
    try:
        yield
    except Exception as err:
        text = traceback.format_exc()
        logging.error("node %s failed:\n%s", name, text)
        cause = f"raised {type(err).__name__}: {err}".splitlines()[0]
        record_failure(run_dir, name, f"{cause}\n\n{text}")
        # Under test_mt the node is a thread of the test process, and Launchpad's test
        # harness answers a thread that raised by SIGQUIT-killing that whole process 3 s
        # later, unless the test's own cleanup ran first (a race the failing-node test
        # lost under load): the failure is recorded and the program stopping, so the
        # thread just ends.
        if not in_own_process():
            lp.stop()
            return
        timer = threading.Timer(_EXIT_AFTER_FAILURE_S, os._exit, (1,))
        timer.daemon = True
        timer.start()
        raise
    if in_own_process():
        exits.now(0)  # the body is done: its files closed, its result written


def in_own_process() -> bool:
    """True when this node is a process of its own (local_mp, Ray), not a test_mt thread.
    Ask in the node's main thread: Launchpad's launch context is per thread."""
    return lp_context.get_context().launch_type is not lp_context.LaunchType.TEST_MULTI_THREADING


def attempt() -> int:
    """0 in a node's first process, n in its n-th restart (set by its launcher)."""
    return int(os.environ.get(ATTEMPT_ENV, "0"))


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


def read_failure(run_dir: str, name: str):
    """The failure report of node `name`, or None."""
    try:
        with open(failure_path(run_dir, name)) as f:
            return f.read()
    except FileNotFoundError:
        return None


def record_exit(run_dir: str, name: str, cause: str, output_path: str, tail_lines: int = 20) -> str:
    """Names how node `name` ended (`cause`: a signal, an exit code, a lost host) in its
    failure report: after the exception it wrote itself, or, for a node that could not
    write one, with the last lines of its output. Returns the report's first line."""
    own = read_failure(run_dir, name)
    if own is not None:
        first, _, rest = own.partition("\n")
        text = f"{first} ({cause})\n{rest}"
    else:
        tail = nodeproc.output_tail(output_path, tail_lines)
        text = f"{cause}\n\nlast output ({output_path}):\n{tail}"
    record_failure(run_dir, name, text)
    return summary(text)


def annotate_failure(run_dir: str, name: str, where: str) -> None:
    """Adds where node `name` ran ("on host ...") to its failure report's first line."""
    text = read_failure(run_dir, name)
    if text is None or where in text:
        return
    first, _, rest = text.partition("\n")
    record_failure(run_dir, name, f"{first} ({where})\n{rest}")


def summary(text: str) -> str:
    """The one-line cause at the head of a failure report."""
    return text.strip().splitlines()[0] if text.strip() else "failed"


def read_failures(run_dir: str) -> dict:
    """{node name: report text} of the nodes whose failure ended this run."""
    path = os.path.join(run_dir, FAILURES_DIR)
    if not os.path.isdir(path):
        return {}
    failures = {}
    for filename in sorted(os.listdir(path)):
        if not filename.endswith(".txt"):
            continue
        with open(os.path.join(path, filename)) as f:
            failures[filename[: -len(".txt")].replace("_", "/", 1)] = f.read()
    return failures
