"""The replay server's checkpoints: Reverb's checkpointer for the replay node, and the
learner's requests for one (kept and sealed with the learner's, `distrl.checkpoints.replay`)."""

import threading
import time

from absl import logging
from reverb.platform import checkpointers_lib

from distrl import checkpoints
from distrl.replay.connection import Connection


def make_checkpointer(
    path: str, fallback: str | None = None
) -> checkpointers_lib.DefaultCheckpointer:
    """Reverb's checkpointer for the replay node, writing under `path` (the run dir).

    Without one, Reverb's server makes a fresh temp dir under /tmp. This one also
    loads, when the server starts, the newest complete checkpoint found in `path`,
    or, when `path` is empty, the checkpoint at `fallback`. distrl empties `path`
    first (`checkpoints.replay.adopt`: the launcher on a resume, the replay node on
    a restart) and passes the checkpoint it chose and verified as `fallback`.
    Reverb writes each checkpoint to its own directory and marks it DONE when
    complete.
    """
    return checkpointers_lib.DefaultCheckpointer(path, fallback_checkpoint_path=fallback)


def checkpoint(
    connection: Connection,
    timeout_s: float = 10.0,
    keep_in: str | None = None,
    keep: int = 3,
    learner_checkpoint: str | None = None,
) -> str | None:
    """Asks the server to checkpoint its tables; the path, or None (logged) on failure.

    `Client.checkpoint` has no deadline, so it runs in a helper thread: a server
    that is already shutting down must not hang the learner's final checkpoint.
    It goes through `connection` (`Connection.call`): after a replay restart the
    request reconnects (within what is left of `timeout_s`) instead of failing
    until gRPC's own reconnect. With `keep_in` (a run directory) the checkpoint
    joins the run's newest `keep`, sealed with `learner_checkpoint`, its round
    (`distrl.checkpoints.replay.keep`).
    """
    outcome = {}
    deadline = time.monotonic() + timeout_s

    def call():
        try:
            outcome["path"] = connection.call(
                lambda client: client.checkpoint(),
                "a checkpoint request",
                within_s=max(0.0, deadline - time.monotonic()),
            )
        except Exception as err:  # noqa: BLE001 - grpc surfaces several error types
            outcome["error"] = err

    thread = threading.Thread(target=call, name="reverb-checkpoint", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if "path" not in outcome:
        logging.warning("replay: checkpoint failed (%s)", outcome.get("error", "timed out"))
    elif keep_in is not None:
        try:
            checkpoints.replay.keep(outcome["path"], keep_in, keep, learner_checkpoint)
        except OSError as err:
            logging.warning("replay: keeping checkpoint %s failed: %s", outcome["path"], err)
    return outcome.get("path")
