"""Failure reports: `<run_dir>/failures/<node>.txt`, one per node whose failure ended the run.

A report's first line names the cause ("raised KeyError: 'x'", "exited with code
-9 (killed by SIGKILL)"); the rest holds the traceback or the node's last output.
Written by a failing node itself (`exception_report`, from its lifecycle's guard,
`distrl.nodes.lifecycle`) and by the launcher that saw it die (`distrl.program`),
read back by the launcher for result.json and `NodeFailure`. Plain files only: both
sides import it.
"""

import os
import traceback

from absl import logging

FAILURES_DIR = "failures"


def failure_path(run_dir: str, name: str) -> str:
    return os.path.join(run_dir, FAILURES_DIR, name.replace("/", "_") + ".txt")


def record_failure(run_dir: str, name: str, text: str) -> None:
    """Writes (replaces) the failure report of node `name`."""
    path = failure_path(run_dir, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def record_failure_once(run_dir: str, name: str, text: str) -> bool:
    """Writes the report of `name` unless one is there (several writers may see the
    same failure: the first one's stays); True when this call wrote it."""
    path = failure_path(run_dir, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return True


def exception_report(err: Exception) -> str:
    """The report of a node whose body raised `err`: its cause, then its traceback.
    Call it in the `except` block (the traceback is the one being handled)."""
    cause = f"raised {type(err).__name__}: {err}".splitlines()[0]
    return f"{cause}\n\n{traceback.format_exc()}"


def record_exception(run_dir: str, name: str, err: Exception) -> None:
    """Logs and writes the report of node `name`, whose body raised `err` (both guards:
    call it in the `except` block)."""
    report = exception_report(err)
    logging.error("node %s failed: %s", name, report)
    record_failure(run_dir, name, report)


def read_failure(run_dir: str, name: str):
    """The failure report of node `name`, or None."""
    try:
        with open(failure_path(run_dir, name)) as f:
            return f.read()
    except FileNotFoundError:
        return None


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
