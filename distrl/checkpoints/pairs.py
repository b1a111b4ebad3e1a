"""Which replay checkpoint goes with which learner checkpoint: a resume's pair, and
what a replay node restarted during the run loads.

- `select`, in the launcher before a resume starts any node: the newest replay
  checkpoint that is usable (`replay_checkpoints.problem`) and not newer than the learner
  checkpoint the resume continues (its own round's when that one is usable), naming
  each newer one skipped and why; a run whose checkpoints are all unusable is
  refused before start (CheckpointError, exit 2). `pairing` is the one line that
  says which pair.
- `for_restart`, in a replay node restarted during the run: the same checks
  (`newest_usable`) and the same `replay_checkpoints.adopt`, without the pairing (the learner is
  live); none usable: an empty table, with a warning.
"""

import os

from absl import logging

from distrl.checkpoints import replay as replay_checkpoints
from distrl.checkpoints import store


def _unpaired(path: str, learner_checkpoint: str) -> str | None:
    """Why the (usable) replay checkpoint at `path` cannot go with `learner_checkpoint`."""
    own = replay_checkpoints.round_of(path)
    if not isinstance(own, str):
        return "sealed without a learner checkpoint round: it cannot be paired"
    if store.written_ms(own) > store.written_ms(learner_checkpoint):
        return (
            f"newer than learner checkpoint {learner_checkpoint} (its round is {own}): "
            "its items may be acted with params that learner never had"
        )
    return None


def newest_usable(
    run_dir: str, learner_checkpoint: str | None = None
) -> tuple[str | None, list[str]]:
    """(the newest usable replay checkpoint of the run, or None; ['path: why'] of each
    newer one skipped, newest first). Usable: `replay_checkpoints.problem` finds nothing, and with
    `learner_checkpoint` (a state file name) it is not newer than that one."""
    skipped = []
    for path in replay_checkpoints.candidates(run_dir):
        why = replay_checkpoints.problem(path)
        if why is None and learner_checkpoint is not None:
            why = _unpaired(path, learner_checkpoint)
        if why is None:
            return path, skipped
        skipped.append(f"{path}: {why}")
    return None, skipped


def select(run_dir: str, learner_checkpoint: str) -> tuple[str | None, list[str]]:
    """(the replay checkpoint to resume with `learner_checkpoint`, or None if the run
    has none; ['path: why'] skipped, newest first).

    The newest usable checkpoint not newer than the learner checkpoint (a state
    file name), so its round's own when that one is usable. CheckpointError naming
    the newest when the run has checkpoints and none fits.
    """
    path, skipped = newest_usable(run_dir, learner_checkpoint)
    if path is None and skipped:
        raise store.CheckpointError(
            f"no replay checkpoint of {run_dir} can be loaded with learner checkpoint "
            f"{learner_checkpoint}; the newest, {skipped[0]}"
            + (f" (and {len(skipped) - 1} older)" if len(skipped) > 1 else "")
            + f". Delete {replay_checkpoints.reverb_dir(run_dir)} and "
            f"{replay_checkpoints.kept_dir(run_dir)} to resume with an empty replay"
        )
    for note in skipped:
        logging.warning("replay checkpoint skipped: %s", note)
    return path, skipped


def for_restart(run_dir: str) -> str | None:
    """The checkpoint a replay node restarted during the run loads (None: an empty
    table), said in one log line with each newer one skipped and why.

    The newest usable one (`replay_checkpoints.problem`), else the one before, and so on. Reverb by
    itself would load the newest with DONE in its directory, unverified, so that
    directory is emptied (`replay_checkpoints.adopt`) and the chosen one is loaded as Reverb's
    fallback, as on a resume. Not paired with a learner checkpoint: the live
    learner is newer than every one.
    """
    replay_checkpoints.adopt(run_dir)
    path, skipped = newest_usable(run_dir)
    notes = f"; skipped: {'; '.join(skipped)}" if skipped else ""
    if path is not None:
        say = logging.warning if skipped else logging.info
        say(
            "replay restarted from checkpoint %s (round %s), the newest usable%s",
            path,
            replay_checkpoints.round_of(path),
            notes,
        )
    elif skipped:
        logging.warning("replay restarted with an empty table: no usable checkpoint%s", notes)
    else:
        logging.warning("replay restarted with an empty table: the run has no checkpoint yet")
    return path


def pairing(manifest: dict, path: str | None, skipped: list[str]) -> str:
    """The one line that says which pair a resume continues from, and why."""
    learner = f"learner checkpoint {manifest['state_file']} (version {manifest['version']})"
    if path is None:
        return f"resuming from {learner} with an empty replay: the run has no replay checkpoint"
    own = replay_checkpoints.round_of(path)
    replay = f"replay checkpoint {os.path.basename(path)}"
    if own == manifest["state_file"]:
        return f"resuming from {learner} and {replay}: written in the same round"
    notes = [
        s
        for s in skipped
        if replay_checkpoints.round_of(s.split(": ", 1)[0]) == manifest["state_file"]
    ]
    why = (
        f"its own round's is unusable ({notes[0].split(': ', 1)[1]})"
        if notes
        else "no usable seal names its round (Reverb did not answer in time, or it broke)"
    )
    return (
        f"resuming from {learner} and {replay} of an older round ({own}), the newest usable "
        f"one not newer than the learner: {why}; items acted after it are lost"
    )
