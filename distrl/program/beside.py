"""A program run by the local supervisor while a task of the caller's runs beside it,
until the task is done: how the benchmarks time a program (`benchmarks.stages`) with
its nodes started as distrl starts them, forks of the preloaded parent (`zygote`),
instead of a fresh interpreter each.

The supervisor runs in the calling thread, which must be the main one (it handles
signals, and the nodes die with the thread that started them); the task runs in a
worker thread started once every node is, and its end (a return or an exception)
creates the stop file, so the supervisor stops every node and ends the preloaded
parent before `run` returns. A program that stops first (a node failed, or every node
exited) leaves the task to finish on its own: `run` waits for it.
"""

import contextlib
import sys
import threading
import types

from distrl.program import supervisor

# A failed node stops the program (Launchpad's own local_mp restarts none either).
_NO_RESTARTS = types.SimpleNamespace(
    restart=types.SimpleNamespace(max_per_node=0, backoff_seconds=0.0)
)


def run(program, run_dir: str, envs: dict, task, output_dir: str | None = None, stream=None):
    """Runs `program` (nodes' environment per group in `envs`, their supervisor's files
    in `run_dir`) while `task()` runs; returns its result, or raises its exception.
    Each node's output goes to `<output_dir>/<group>/<index>`, or without `output_dir`
    to this process's stdout, each line prefixed with the node's name."""
    outcome: dict = {}
    workers: list[threading.Thread] = []

    def start(stop_file: str) -> None:
        def work() -> None:
            try:
                outcome["result"] = task()
            except BaseException as err:  # noqa: BLE001 - raised again in the caller's thread
                outcome["error"] = err
            finally:
                with contextlib.suppress(OSError):  # gone: the program already stopped
                    open(stop_file, "w").close()

        workers.append(threading.Thread(target=work, name="beside", daemon=True))
        workers[0].start()

    supervisor.run(
        program,
        _NO_RESTARTS,
        run_dir,
        envs,
        stream or sys.stdout,
        "output_to_files" if output_dir else "current_terminal",
        show_progress=False,
        output_dir=output_dir,
        started=start,
    )
    for worker in workers:  # none when the supervisor failed before every node started
        worker.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("result")
