"""Ending a process at once when its work is done.

Python's own exit first tears down what the learning stack left running: it waits on
gRPC's and courier's threads and unloads TensorFlow and JAX, seconds of nothing after a
command has finished, and in a node process until Launchpad's stop alarm kills it
with SIGALRM (exit code -14) about a second into each stop phase (docs/decisions.md,
"Done means gone"). Every caller has closed its files and written its results before
it calls `now`.
"""

import atexit
import contextlib
import os
import sys

from absl import logging


def status(code) -> int:
    """The exit status Python makes of `sys.exit(code)`: None is 0, an int itself, and
    anything else is printed on stderr and is 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def flush() -> None:
    """The log and the standard streams out (a stream already closed is skipped)."""
    logging.flush()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()


_BEFORE_EXIT = []  # what `now` runs first: ends children that must not outlive us


def before_exit(fn) -> None:
    """Has `now` call `fn()` before the process ends (Python's own exit as well)."""
    _BEFORE_EXIT.append(fn)
    atexit.register(fn)


def now(code=0) -> None:
    """Exits with `code` (as `sys.exit` takes it, see `status`) once `flush`ed,
    skipping Python's teardown (but not the `before_exit` functions)."""
    code = status(code)
    for fn in _BEFORE_EXIT:
        with contextlib.suppress(Exception):
            fn()
    flush()
    os._exit(code)
