"""A small Launchpad program run by distrl's local supervisor, for tests/test_supervise.py.

    python tests/supervise_program.py RUN_DIR MODE MAX_RESTARTS

MODE "faults": the "victim" node dies a different way in each process (SIGKILL,
an exception, a native abort), then stops the program; "fatal": it is SIGKILLed
once; "hang": every node waits for the stop (the orphan test kills this launcher).
A "sleeper" node waits for the stop throughout. Prints the restarts and the
failures as one JSON line at the end.
"""

import json
import os
import signal
import sys
import time

import launchpad as lp
import ml_collections
from absl import app

from distrl.nodes import lifecycle
from distrl.program import supervisor
from distrl.program.lifecycle import LAUNCHPAD
from distrl.records import failures


def sleeper():
    lp.wait_for_stop()


def victim(run_dir: str, mode: str):
    with LAUNCHPAD.guard("victim", run_dir):
        time.sleep(1.0)
        attempt = lifecycle.attempt()
        if mode == "hang":
            lp.wait_for_stop()
        elif mode == "fatal" or attempt == 0:
            os.kill(os.getpid(), signal.SIGKILL)
        elif attempt == 1:
            raise ValueError("injected in attempt 1")
        elif attempt == 2:
            os.abort()
        else:
            lp.stop()


def main(argv):
    run_dir, mode, max_restarts = argv[1], argv[2], int(argv[3])
    program = lp.Program("supervised")
    with program.group("sleeper"):
        program.add_node(lp.PyNode(sleeper))
    with program.group("victim"):
        program.add_node(lp.PyNode(victim, run_dir, mode))
    config = ml_collections.ConfigDict(
        {"restart": {"max_per_node": max_restarts, "backoff_seconds": 0.2}}
    )
    restarts = supervisor.run(
        program,
        config,
        run_dir,
        {"sleeper": {}, "victim": {}},
        sys.stdout,
        "output_to_files",
        show_progress=False,
    )
    reports = {n: failures.summary(t) for n, t in failures.read_failures(run_dir).items()}
    print(json.dumps({"restarts": restarts, "failures": reports}), flush=True)


if __name__ == "__main__":
    app.run(main)
