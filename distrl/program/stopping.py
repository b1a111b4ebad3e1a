"""How both launchers stop a program: the order of the node groups, the notice between
SIGTERM and SIGKILL, and what a stop signal to the launcher does meanwhile."""

import contextlib
import signal
import threading

from absl import flags

# Stopped first, one group after another; then the rest (replay, counter): the
# learner's final checkpoint asks the replay node for its tables and the counter
# for its totals, so both still run while it writes.
_STOP_ORDER = (("actor", "evaluator"), ("learner",))
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def stop_phases(names) -> list[list[str]]:
    """The node names in the order they stop (`_STOP_ORDER`, then every other node)."""
    ordered = [[n for n in names if n.split("/")[0] in labels] for labels in _STOP_ORDER]
    return ordered + [[n for n in names if not any(n in phase for phase in ordered)]]


def termination_notice_secs() -> float:
    """Seconds a node gets between SIGTERM and SIGKILL (--lp_termination_notice_secs)."""
    try:
        return float(flags.FLAGS.lp_termination_notice_secs)
    except (flags.UnparsedFlagAccessError, AttributeError):
        return 10.0


@contextlib.contextmanager
def _handled(signals, handler):
    """`handler` for `signals` within the block; the previous handlers after it."""
    previous = {sig: signal.signal(sig, handler) for sig in signals}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


@contextlib.contextmanager
def stop_signals_interrupt():
    """SIGTERM and SIGHUP to the launcher stop the program as Ctrl-C does."""

    def interrupt(signum, frame):
        del signum, frame
        raise KeyboardInterrupt

    with _handled((signal.SIGTERM, signal.SIGHUP), interrupt):
        yield


@contextlib.contextmanager
def stop_signals_ignored():
    """Ctrl-C, SIGTERM and SIGHUP ignored for the block: a second signal must not cut
    the stop of every node short and leave some running."""
    with _handled(_STOP_SIGNALS, signal.SIG_IGN):
        yield


@contextlib.contextmanager
def stop_signals_noted():
    """Ctrl-C, SIGTERM and SIGHUP set the event this yields, instead of raising.

    A KeyboardInterrupt can be lost on a Ray driver, which then goes on watching and
    stops nothing (docs/decisions.md, "A stop signal to the Ray launcher is an event,
    not a KeyboardInterrupt"): it surfaces wherever the main thread runs its next
    Python bytecode, which on a Ray driver may be inside Ray's own code, and Python
    code that Ray's native core calls back into cannot pass an exception on (it is
    printed and dropped). A handler that only sets an event has nothing to lose; the
    watch looks at it between its waits.
    """
    signalled = threading.Event()

    def note(signum, frame):
        del signum, frame
        signalled.set()

    with _handled(_STOP_SIGNALS, note):
        yield signalled
