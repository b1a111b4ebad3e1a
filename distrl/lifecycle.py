"""Stage 6 of the data flow, shared by every node: stop requests and failures.

Launchpad's `local_mp` launcher does not notice a node process that dies, so a
crashed node would leave the rest running until a budget nobody checks. Each node
therefore runs its body inside `guard(name, run_dir)`: an exception is written to
`<run_dir>/failures/<name>.txt` (the launcher reports it by name) and stops the
whole program.
"""

import contextlib
import os
import traceback

import launchpad as lp
from absl import logging

FAILURES_DIR = "failures"


def should_stop() -> bool:
    """True once the program is stopping (budget, target, signal or failure)."""
    return lp.wait_for_stop(0)


@contextlib.contextmanager
def guard(name: str, run_dir: str):
    """Runs a node body; on an exception, records it and stops the program."""
    try:
        yield
    except Exception:
        text = traceback.format_exc()
        logging.error("node %s failed; stopping the program:\n%s", name, text)
        path = os.path.join(run_dir, FAILURES_DIR)
        os.makedirs(path, exist_ok=True)
        with open(os.path.join(path, name.replace("/", "_") + ".txt"), "w") as f:
            f.write(text)
        lp.stop()
        raise


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
