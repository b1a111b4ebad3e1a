"""What a launch can end with besides a result: raised by the launchers, caught by
launch/train.py."""

import os

from distrl.records.failures import FAILURES_DIR, summary


class LaunchError(RuntimeError):
    """The program could not be started where asked (e.g. no Ray cluster, nodes not placed)."""


class NodeFailure(RuntimeError):
    """One or more nodes failed and the program was stopped. Maps node name -> report.

    The message is one line: each node with its cause (the first line of its report
    in `failures/`), and where the full reports are.
    """

    def __init__(self, failures, run_dir: str):
        self.failures = failures
        causes = "; ".join(f"{name} {summary(text)}" for name, text in failures.items())
        where = os.path.join(run_dir, FAILURES_DIR)
        super().__init__(f"node failure, the program was stopped: {causes} (reports: {where})")
