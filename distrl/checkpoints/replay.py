"""Replay checkpoints that can always be resumed: kept, sealed and verified.

Reverb's own checkpointer (`replay.make_checkpointer`) writes each checkpoint of
the tables into `<run_dir>/checkpoints/replay/<UTC time>/` (`tables`, `chunks`,
`items` as ZLIB TFRecord files, then an empty `DONE`) and deletes the one before,
so alone it keeps one, and loads the newest with DONE when the server starts. Here:

- `keep`: after each checkpoint the learner hard-links its files into
  `checkpoints/replay-kept/<same name>/` (no copy; Reverb's deletion of the
  original leaves the link) and seals it: `distrl.json` holds each file's size and
  SHA-256, computed after Reverb finished, and the learner checkpoint of the same
  round. The kept directory appears (a rename) with its seal or not at all. All but
  the newest `config.checkpoint.keep` sealed ones are deleted.
- A round: the learner writes its checkpoint, then asks Reverb for one, its update
  loop paused meanwhile, so every item in that replay checkpoint was acted with
  params no newer than that learner checkpoint's (`checkpoints.learner.Saver`).
- `problem`: why a checkpoint cannot be loaded (not DONE, not sealed, a file that
  does not match its seal), or None.
- `adopt`: moves Reverb's directory's checkpoints into the kept ones, so that it
  is empty and the replay server loads the chosen checkpoint (Reverb's
  `fallback_checkpoint_path`, used only when its directory is empty).
Which one a resume or a restarted replay node loads: `checkpoints.pairs`.
"""

import glob
import hashlib
import json
import os
import shutil
import time

from distrl import files

SEAL = "distrl.json"  # written by `keep` after Reverb finished: sizes, checksums, round
SEAL_FORMAT = "distrl-replay-checkpoint/1"
_DONE = "DONE"
_FILES = ("tables.tfrecord", "chunks.tfrecord", "items.tfrecord")
_BLOCK = 1 << 20  # bytes hashed per read
_SELF_SHA = "seal_sha256"  # the seal's own checksum, over every other field


def reverb_dir(run_dir: str) -> str:
    """Where Reverb writes (and a restarted replay node reads) its checkpoints."""
    return os.path.join(run_dir, "checkpoints", "replay")


def kept_dir(run_dir: str) -> str:
    return os.path.join(run_dir, "checkpoints", "replay-kept")


def keep(path: str, run_dir: str, count: int | None, learner_checkpoint: str | None) -> str:
    """Hard-links the complete checkpoint at `path` into the kept ones and seals it with
    `learner_checkpoint` (the state file of its round's learner checkpoint; None: no
    round, never paired on resume); keeps the newest `count` sealed ones (None: all).
    Returns the kept path."""
    target = os.path.join(kept_dir(run_dir), os.path.basename(path.rstrip("/")))
    if not os.path.isdir(target):  # kept already when Reverb's copy is adopted
        _link(path, target, dict(learner_checkpoint=learner_checkpoint))
    if count is not None:
        _prune(run_dir, count)
    return target


def _link(path: str, target: str, round_: dict | None) -> None:
    """Hard-links `path`'s files into `target`, sealed with `round_` unless None; the
    directory appears whole (a rename), with its seal."""
    tmp = target + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    for name in os.listdir(path):
        os.link(os.path.join(path, name), os.path.join(tmp, name))
    if round_ is not None:
        names = sorted(os.listdir(tmp))
        seal = dict(
            format=SEAL_FORMAT,
            **round_,
            sealed_at=time.time(),
            files={name: fingerprint(os.path.join(tmp, name)) for name in names},
        )
        seal[_SELF_SHA] = _self_sha256(seal)
        files.write_atomic(os.path.join(tmp, SEAL), json.dumps(seal, indent=1), durable=True)
    os.replace(tmp, target)


def fingerprint(file: str) -> dict:
    """{"size": bytes, "sha256": hex digest} of a file, read in 1 MiB blocks."""
    digest, size = hashlib.sha256(), 0
    with open(file, "rb") as f:
        while block := f.read(_BLOCK):
            digest.update(block)
            size += len(block)
    return dict(size=size, sha256=digest.hexdigest())


def _prune(run_dir: str, count: int) -> None:
    """Deletes every kept checkpoint older than the newest `count` sealed ones."""
    kept = sorted(d for d in glob.glob(os.path.join(kept_dir(run_dir), "*")) if _is_checkpoint(d))
    sealed = [d for d in kept if os.path.exists(os.path.join(d, SEAL))]
    if len(sealed) > count:
        for old in kept[: kept.index(sealed[-count])]:
            shutil.rmtree(old, ignore_errors=True)


def problem(path: str) -> str | None:
    """Why the checkpoint at `path` cannot be loaded, or None if it can.

    Complete (DONE), sealed (`keep`), and every file the seal lists present with
    its size and SHA-256 at sealing: a file cut by one byte or overwritten is
    caught without reading a record (TFRecord's own CRCs miss a ZLIB file cut in
    its last bytes).
    """
    if not os.path.exists(os.path.join(path, _DONE)):
        return "no DONE marker (a checkpoint write that did not finish)"
    seal, why = read_seal(path)
    if why:
        return why
    listed = seal["files"]
    absent = [name for name in _FILES if name not in listed]
    if absent:
        return f"{SEAL} lists no {absent[0]} (not a whole Reverb checkpoint)"
    for name, want in listed.items():
        file = os.path.join(path, name)
        if not os.path.exists(file):
            return f"{name} is missing"
        size = os.path.getsize(file)
        if size != want["size"]:
            return f"{name} is {size} bytes, {want['size']} when sealed (cut short?)"
    for name, want in listed.items():  # sizes first: they cost no read
        try:
            sha256 = fingerprint(os.path.join(path, name))["sha256"]
        except OSError as err:
            return f"{name} cannot be read ({type(err).__name__}: {err})"
        if sha256 != want["sha256"]:
            return f"{name} does not match its SHA-256 in {SEAL} (corrupt)"
    return None


def read_seal(path: str) -> tuple[dict | None, str | None]:
    """(the seal of the checkpoint at `path`, None) or (None, why there is no usable one)."""
    try:
        seal = files.read_json(os.path.join(path, SEAL))
    except FileNotFoundError:
        return None, (
            f"not sealed (no {SEAL}): Reverb finished it but the learner did not seal it "
            "(killed in between, or a run from before seals)"
        )
    except (OSError, ValueError) as err:
        return None, f"{SEAL} is unreadable ({type(err).__name__}: {err})"
    ok = isinstance(seal, dict) and seal.get("format") == SEAL_FORMAT
    listed = seal.get("files") if ok else None
    if not isinstance(listed, dict) or not all(
        isinstance(v, dict) and {"size", "sha256"} <= set(v) for v in listed.values()
    ):
        return None, f"{SEAL} is not a distrl replay seal ({SEAL_FORMAT})"
    if seal.get(_SELF_SHA) != _self_sha256(seal):
        return None, f"{SEAL} is corrupt: its content does not match its {_SELF_SHA}"
    return seal, None


def _self_sha256(seal: dict) -> str:
    """SHA-256 of the seal's content without this field (canonical JSON)."""
    rest = {k: v for k, v in seal.items() if k != _SELF_SHA}
    return hashlib.sha256(json.dumps(rest, sort_keys=True).encode()).hexdigest()


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


def round_of(path: str) -> str | None:
    """The learner checkpoint (state file) sealed with the replay checkpoint at `path`."""
    seal, _ = read_seal(path)
    return seal.get("learner_checkpoint") if seal else None


def adopt(run_dir: str) -> None:
    """Moves Reverb's checkpoints into the kept ones: Reverb's directory is left empty.
    One the learner never sealed is kept unsealed (never loaded). Nothing is pruned
    here: the checkpoint chosen to load may be older than others."""
    for path in glob.glob(os.path.join(reverb_dir(run_dir), "*")):
        target = os.path.join(kept_dir(run_dir), os.path.basename(path))
        done = os.path.exists(os.path.join(path, _DONE))
        if _is_checkpoint(path) and done and not os.path.isdir(target):
            _link(path, target, None)
        shutil.rmtree(path, ignore_errors=True)
