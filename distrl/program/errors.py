"""What a launch can end with besides a result: raised by the launchers, caught by launch/train.py."""

import os

from distrl.program import lifecycle


class LaunchError(RuntimeError):
    """The program could not be started where asked (e.g. no Ray cluster, nodes not placed)."""


class NodeFailure(RuntimeError):
    """One or more nodes raised; the program was stopped. Maps node name -> traceback."""

    def __init__(self, failures, run_dir: str):
        self.failures = failures
        names = ", ".join(failures)
        last_lines = "\n".join(
            f"  {name}: {text.strip().splitlines()[-1]}" for name, text in failures.items()
        )
        super().__init__(
            f"node(s) {names} failed; the program was stopped.\n{last_lines}\n"
            f"Tracebacks: {os.path.join(run_dir, lifecycle.FAILURES_DIR)}"
        )
