"""Stage 7, the nodes' lifecycle under Launchpad: `LAUNCHPAD`, which the program gives
every node it builds (`distrl.program.topology`; `distrl.nodes.lifecycle` says what
a node asks of it).

Each node runs its body inside `LAUNCHPAD.guard(name, run_dir)`: an exception is
written to `<run_dir>/failures/<name>.txt` (`distrl.records.failures`), and the node process
exits non-zero. The launcher that watches the node processes
(`distrl.program.supervisor` here, `distrl.program.ray.cluster` on Ray) then restarts
it or stops the program, and writes the report of a node that died without one
(`nodeproc.record_exit`: a signal, a native abort, an exit code). Under `test_mt`
(threads) the guard stops the program itself.

Under `--lp_launch_type=ray` a node's stop request cannot signal a launcher on
another machine: `stop_via_file` (the program stopper `distrl.program.staging` gives
each node) touches the file its launcher or node host watches, and the launcher
stops every node.
"""

import contextlib
import os
import signal
import threading

import launchpad as lp
from launchpad import context as lp_context

from distrl import exits
from distrl.program.ray import STOP_FILE_ENV
from distrl.records import failures

# A node process whose body raised must exit for its launcher to see it; a lingering
# non-daemon thread (a server, a client) must not keep it alive longer than this.
_EXIT_AFTER_FAILURE_S = 10.0


class LaunchpadLifecycle:
    """A node's lifecycle when Launchpad runs it (local_mp, test_mt, Ray).

    Stateless: every call asks Launchpad, whose stop event and launch context are
    per thread, so call each method in the thread the docstring names. Pickled by
    reference with the node's constructor arguments.
    """

    def should_stop(self, wait_seconds: float = 0.0) -> bool:
        """True once the program is stopping (budget, target, signal or failure).

        Waits up to `wait_seconds` for the stop first (0: answers at once).
        """
        return lp.wait_for_stop(wait_seconds)

    def stop_flag(self):
        """`should_stop()` for any thread, e.g. a courier handler's (a node stepped by a test).

        Call it in the node's own thread (its constructor runs there): Launchpad's stop
        event is that thread's. Outside a program the flag is never set.
        """
        try:
            return lp.stop_event().is_set
        except RuntimeError:  # no worker manager in this thread
            return threading.Event().is_set

    def stop_event(self) -> threading.Event:
        """The program's stop event; fetch it in the node's main thread (its worker manager
        is that thread's) and wait on it in any other."""
        return lp.stop_event()

    def request_stop(self) -> None:
        """Stops the whole program (every node), from any node."""
        lp.stop()

    def in_own_process(self) -> bool:
        """True when this node is a process of its own (local_mp, Ray), not a test_mt thread.
        Ask in the node's main thread: Launchpad's launch context is per thread."""
        launch_type = lp_context.get_context().launch_type
        return launch_type is not lp_context.LaunchType.TEST_MULTI_THREADING

    @contextlib.contextmanager
    def guard(self, name: str, run_dir: str):
        """Runs a node body; on an exception, records it and ends the node (see the module)."""
        _StopNotice()
        try:
            yield
        except Exception as err:
            failures.record_exception(run_dir, name, err)
            # Under test_mt the node is a thread of the test process, and Launchpad's test
            # harness answers a thread that raised by SIGQUIT-killing that whole process 3 s
            # later, unless the test's own cleanup runs first (a race under load): the
            # failure is recorded and the program stopping, so the thread just ends.
            if not self.in_own_process():
                lp.stop()
                return
            timer = threading.Timer(_EXIT_AFTER_FAILURE_S, os._exit, (1,))
            timer.daemon = True
            timer.start()
            raise
        if self.in_own_process():
            exits.now(0)  # the body is done: its files closed, its result written


LAUNCHPAD = LaunchpadLifecycle()


class _StopNotice:
    """Sets the stop event on SIGTERM or SIGINT even while the main thread is stuck.

    Launchpad's handler that sets the node's stop event is a Python signal handler,
    which runs only when the main thread executes Python: a main thread blocked in a
    native call (a Reverb sample in the learner) never sees the stop, and nothing
    waiting on the event (the learner's final checkpoint) runs. The C-level
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


def stop_via_file() -> None:
    """Program stopper of a node launched as a process by distrl's launchers: asks its
    launcher (the supervisor, or its Ray node host) to stop the program."""
    with open(os.environ[STOP_FILE_ENV], "w"):
        pass
