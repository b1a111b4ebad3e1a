"""Replay checkpoints that can always be resumed: kept, verified, chosen before launch.

Reverb's own checkpointer (`replay.make_checkpointer`) writes each checkpoint of
the tables into `<run_dir>/checkpoints/replay/<UTC time>/` (`tables`, `chunks`,
`items` as ZLIB TFRecord files, then an empty `DONE`) and deletes the one before,
so alone it keeps one, and loads the newest with DONE when the server starts. Here:

- `keep`: after each checkpoint the learner hard-links its files into
  `checkpoints/replay-kept/<same name>/` (no copy; Reverb's deletion of the
  original leaves the link) and deletes all but the newest `config.checkpoint.keep`.
- `select`, in the launcher before a resume starts any node: the newest checkpoint
  (kept or Reverb's) that is complete (DONE) and readable (every record of every
  file, CRC-checked), naming each newer one skipped and why; a run whose
  checkpoints are all unusable is refused before start (CheckpointError, exit 2).
- `adopt`: moves Reverb's directory's checkpoints into the kept ones, so that it
  is empty and the replay server loads the chosen checkpoint (Reverb's
  `fallback_checkpoint_path`, used only when its directory is empty). A replay node
  restarted during the run loads its own newest checkpoint from that directory.
"""

import glob
import os
import shutil

from absl import logging

from distrl import checkpoint

_DONE = "DONE"
_FILES = ("tables.tfrecord", "chunks.tfrecord", "items.tfrecord")


def reverb_dir(run_dir: str) -> str:
    """Where Reverb writes (and a restarted replay node reads) its checkpoints."""
    return os.path.join(run_dir, "checkpoints", "replay")


def kept_dir(run_dir: str) -> str:
    return os.path.join(run_dir, "checkpoints", "replay-kept")


def keep(path: str, run_dir: str, count: int | None) -> None:
    """Hard-links the complete checkpoint at `path` into the kept ones; keeps the newest
    `count` (None: all)."""
    target = os.path.join(kept_dir(run_dir), os.path.basename(path.rstrip("/")))
    if not os.path.isdir(target):  # kept already when Reverb's copy is adopted
        shutil.rmtree(target + ".tmp", ignore_errors=True)
        os.makedirs(target + ".tmp")
        for name in os.listdir(path):
            os.link(os.path.join(path, name), os.path.join(target + ".tmp", name))
        os.replace(target + ".tmp", target)
    if count is None:
        return
    kept = sorted(d for d in glob.glob(os.path.join(kept_dir(run_dir), "*")) if _is_checkpoint(d))
    for old in kept[:-count]:
        shutil.rmtree(old, ignore_errors=True)


def problem(path: str) -> str | None:
    """Why the checkpoint at `path` cannot be loaded, or None if it can.

    Complete (DONE), every record of every file readable (ZLIB TFRecords, CRCs
    checked), at least one table, and every chunk an item refers to present: a
    file cut short can read as fewer records without an error, so the references
    between items and chunks are what reveal it.
    """
    if not os.path.exists(os.path.join(path, _DONE)):
        return "no DONE marker (a checkpoint write that did not finish)"
    try:
        tables, chunks, items = (_records(path, name) for name in _FILES)
    except _Unreadable as err:
        return str(err)
    from reverb.cc import schema_pb2  # imported only when a resume reads records

    referenced = set()
    try:
        for record in items:
            item = schema_pb2.PrioritizedItem.FromString(record)
            referenced.update(
                s.chunk_key for c in item.flat_trajectory.columns for s in c.chunk_slices
            )
        present = {schema_pb2.ChunkData.FromString(record).chunk_key for record in chunks}
    except Exception as err:  # noqa: BLE001 - protobuf's DecodeError and others
        return f"a record does not parse ({type(err).__name__}: {err})"
    if not tables:
        return f"{_FILES[0]} holds no table (cut short?)"
    if referenced - present or (chunks and not items):
        return (
            f"{len(referenced - present)} chunks that items refer to are missing, "
            f"{len(items)} items for {len(chunks)} chunks (a file cut short?)"
        )
    return None


class _Unreadable(Exception):
    pass


def _records(path: str, name: str) -> list[bytes]:
    import tensorflow as tf  # imported only when a resume reads records

    file = os.path.join(path, name)
    if not os.path.exists(file):
        raise _Unreadable(f"{name} is missing")
    try:
        return [r.numpy() for r in tf.data.TFRecordDataset(file, compression_type="ZLIB")]
    except Exception as err:  # noqa: BLE001 - TF raises DataLossError and others
        raise _Unreadable(
            f"{name} is unreadable ({type(err).__name__}: {str(err).splitlines()[0]})"
        ) from None


def _is_checkpoint(path: str) -> bool:
    return os.path.isdir(path) and not path.endswith(".tmp")


def candidates(run_dir: str) -> list[str]:
    """Every replay checkpoint of the run, newest first (one per name)."""
    found = {}
    for root in (kept_dir(run_dir), reverb_dir(run_dir)):
        for path in glob.glob(os.path.join(root, "*")):
            if _is_checkpoint(path):
                found.setdefault(os.path.basename(path), path)
    return [found[name] for name in sorted(found, reverse=True)]


def select(run_dir: str) -> tuple[str | None, list[str]]:
    """(newest loadable checkpoint or None if the run has none, ['path: why'] skipped).

    CheckpointError naming the newest when the run has checkpoints and none loads.
    """
    skipped = []
    for path in candidates(run_dir):
        why = problem(path)
        if why is None:
            for note in skipped:
                logging.warning("replay checkpoint skipped: %s", note)
            return path, skipped
        skipped.append(f"{path}: {why}")
    if skipped:
        raise checkpoint.CheckpointError(
            f"no replay checkpoint of {run_dir} can be loaded; the newest, {skipped[0]}"
            + (f" (and {len(skipped) - 1} older)" if len(skipped) > 1 else "")
            + ". Delete them to resume with an empty replay, or set "
            "--config.checkpoint.replay=false"
        )
    return None, skipped


def adopt(run_dir: str) -> None:
    """Moves Reverb's checkpoints into the kept ones: Reverb's directory is left empty.
    Nothing is pruned here: the checkpoint chosen to load may be older than others."""
    for path in glob.glob(os.path.join(reverb_dir(run_dir), "*")):
        if _is_checkpoint(path) and os.path.exists(os.path.join(path, _DONE)):
            keep(path, run_dir, None)
        shutil.rmtree(path, ignore_errors=True)
