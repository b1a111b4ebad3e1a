"""Sealed pytrees on disk: npz + JSON manifest, written atomically, verified on load.

A directory of one `Kind` (the learner's checkpoints, `checkpoints.learner`; the
reported policy's params, `checkpoints.policy`) holds, per save, two files:
- `<prefix>-<version>-<ms>.npz`: the pytree (a learner's `TrainingState`: params,
  target params, optimizer state, RNG key, step) flattened to one array per leaf;
- `<prefix>-<version>-<ms>.json`, its manifest: the npz's SHA-256, every leaf's
  pytree path, shape and dtype, the parameter version, the caller's extra fields
  (the algorithm; a learner's counter totals and elapsed seconds, so a resumed run's
  counters and clock continue), and its own SHA-256 over all that (a changed digit
  still parses as JSON).
The newest `keep` saves are kept; `manifest.json` is a copy of the newest manifest,
for people and tools. Loading takes the newest save that passes every check and
names each newer one it skipped, so a corrupt newest checkpoint falls back to the
one before it.

Why npz + JSON rather than pickle: loading a pickle runs code and names private
classes that move between versions; an npz holds only arrays (`allow_pickle=False`)
and the manifest is text to read and diff. The pytree structure comes from the agent
at load time (`agent.init`) and must match the manifest leaf for leaf, so a checkpoint
of another algorithm or network shape is refused, naming the first leaves that differ.

A `Kind` names what a directory holds (manifest format, file prefix, the noun
messages use); every function takes the learner's (`LEARNER`) by default.

Atomicity: each file is written to a temporary name, fsynced and renamed with
`os.replace`; the npz goes first under a new name, its manifest last. The manifest
is the completed-marker: a write killed before it leaves the previous checkpoint in
force, and an npz whose bytes do not match the manifest's checksum is refused.
"""

import glob
import hashlib
import io
import json
import os
import time
from typing import NamedTuple

import jax
import numpy as np
from absl import logging

from distrl import files
from distrl.errors import ConfigError


class Kind(NamedTuple):
    """What a directory of sealed pytrees holds."""

    format: str  # the manifests' "format" field: one kind is never read as another
    prefix: str  # the files' names: <prefix>-<version>-<ms>.npz / .json
    noun: str  # in messages: "learner checkpoint", "policy"


LEARNER = Kind("distrl-learner-checkpoint/1", "state", "learner checkpoint")
FORMAT = LEARNER.format
MANIFEST = "manifest.json"
_SELF_SHA = "manifest_sha256"  # the manifest's own checksum, over every other field
_TMP_SUFFIX = ".tmp"  # files.write_atomic's temp files: an unfinished write


class CheckpointError(ConfigError):
    """A checkpoint that cannot be resumed from (missing, corrupt or mismatched)."""


def describe(tree) -> list:
    """[(path, shape, dtype)] of a pytree's leaves (arrays or ShapeDtypeStructs)."""
    leaves = jax.tree_util.tree_flatten_with_path(tree)[0]
    return [(jax.tree_util.keystr(p), tuple(x.shape), np.dtype(x.dtype).name) for p, x in leaves]


def save(
    ckpt_dir: str,
    state,
    version: int,
    extra: dict,
    keep: int = 3,
    kind: Kind = LEARNER,
    durable: bool = True,
) -> str:
    """Writes `state` (a TrainingState, or any pytree of arrays) as the newest checkpoint;
    returns its manifest path.

    `extra` (JSON-able: counts, elapsed seconds, ...) goes into the manifest; the
    newest `keep` checkpoints stay, older ones are deleted. durable=False skips the
    fsyncs (most of a small save's cost): still whole after a process kill, and a
    machine crash's damage is refused on load by the checksums.
    """
    os.makedirs(ckpt_dir, exist_ok=True)
    state = jax.device_get(state)
    name = _new_state_name(ckpt_dir, version, kind.prefix)
    buffer = io.BytesIO()
    leaves = jax.tree.leaves(state)
    np.savez(buffer, **{f"leaf_{i}": np.asarray(x) for i, x in enumerate(leaves)})
    data = buffer.getvalue()
    files.write_atomic(os.path.join(ckpt_dir, name), data, durable=durable)
    manifest = dict(
        format=kind.format,
        version=int(version),
        state_file=name,
        sha256=hashlib.sha256(data).hexdigest(),
        written_at=time.time(),
        leaves=[dict(path=p, shape=list(s), dtype=d) for p, s, d in describe(state)],
        **extra,
    )
    manifest[_SELF_SHA] = _self_sha256(manifest)
    text = _manifest_text(manifest).encode()
    path = os.path.join(ckpt_dir, _manifest_name(name))
    files.write_atomic(path, text, durable=durable)
    files.write_atomic(os.path.join(ckpt_dir, MANIFEST), text, durable=durable)
    _remove_stale(ckpt_dir, keep, kind.prefix)
    return path


def written_ms(path: str) -> int:
    """When a checkpoint was written (the <ms> of state-<version>-<ms>, any suffix):
    newest is the latest written, so checkpoints after a fall back to an older
    version win."""
    return int(os.path.basename(path).rsplit(".", 1)[0].rsplit("-", 1)[1])


def _manifest_name(state_file: str) -> str:
    return state_file[: -len(".npz")] + ".json"


def _new_state_name(ckpt_dir: str, version: int, prefix: str) -> str:
    """<prefix>-<version>-<ms>.npz, unused so far: the file the current manifest names
    is never overwritten, even by a second save of the same version."""
    stamp = time.time_ns() // 1_000_000
    while os.path.exists(os.path.join(ckpt_dir, f"{prefix}-{version:010d}-{stamp}.npz")):
        stamp += 1
    return f"{prefix}-{version:010d}-{stamp}.npz"


def _manifest_text(manifest: dict) -> str:
    """Indented JSON with one line per leaf, easy to read and to diff."""
    head = json.dumps({k: v for k, v in manifest.items() if k != "leaves"}, indent=1)
    leaves = ",\n  ".join(json.dumps(leaf) for leaf in manifest["leaves"])
    return f'{head[:-2]},\n "leaves": [\n  {leaves}\n ]\n}}\n'


def _candidates(ckpt_dir: str, kind: Kind = LEARNER) -> list:
    """Manifest paths of the checkpoints in `ckpt_dir`, newest first (a run written
    before checkpoints were kept has only manifest.json)."""
    pattern = os.path.join(ckpt_dir, f"{kind.prefix}-*.json")
    paths = sorted(glob.glob(pattern), key=written_ms, reverse=True)
    legacy = os.path.join(ckpt_dir, MANIFEST)
    return paths or ([legacy] if os.path.exists(legacy) else [])


def _read_manifest_file(path: str, kind: Kind = LEARNER) -> dict:
    try:
        with open(path) as f:
            manifest = json.load(f)
    except (OSError, ValueError) as err:
        raise CheckpointError(f"checkpoint manifest {path} is unreadable: {err}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != kind.format:
        raise CheckpointError(f"{path} is not a distrl {kind.noun} ({kind.format})")
    # Manifests written before the field have none; a changed byte in one that has
    # it (a version, a count) is refused, not resumed from.
    if _SELF_SHA in manifest and manifest[_SELF_SHA] != _self_sha256(manifest):
        raise CheckpointError(
            f"checkpoint manifest {path} is corrupt: its content does not match its {_SELF_SHA}"
        )
    return manifest


def _self_sha256(manifest: dict) -> str:
    """SHA-256 of the manifest's content without this field (canonical JSON)."""
    rest = {k: v for k, v in manifest.items() if k != _SELF_SHA}
    return hashlib.sha256(json.dumps(rest, sort_keys=True).encode()).hexdigest()


def _no_checkpoint(ckpt_dir: str, kind: Kind = LEARNER) -> CheckpointError:
    unfinished = glob.glob(os.path.join(ckpt_dir, f"*{_TMP_SUFFIX}"))
    note = f" (an unfinished write, {unfinished[0]}, is ignored)" if unfinished else ""
    return CheckpointError(f"no complete {kind.noun} in {ckpt_dir}{note}")


def read_manifest(ckpt_dir: str, kind: Kind = LEARNER) -> dict:
    """The newest checkpoint's manifest; CheckpointError when there is no readable one."""
    candidates = _candidates(ckpt_dir, kind)
    if not candidates:
        raise _no_checkpoint(ckpt_dir, kind)
    return _read_manifest_file(candidates[0], kind)


def read_newest(ckpt_dir: str, kind: Kind) -> tuple:
    """(manifest, leaves) of the newest checkpoint, checksum verified, with no fall back
    to an older one: CheckpointError naming the file when it fails a check. Numpy
    only; `check_compatible` then matches it to a pytree."""
    manifest = read_manifest(ckpt_dir, kind)
    return manifest, read_arrays(ckpt_dir, manifest)


def read_version(ckpt_dir: str, version: int, kind: Kind = LEARNER) -> tuple:
    """(manifest, leaves) of the newest kept checkpoint of param version `version`,
    checksum verified; CheckpointError naming the kept versions when none is."""
    kept = {}
    for path in _candidates(ckpt_dir, kind):
        manifest = _read_manifest_file(path, kind)
        kept.setdefault(int(manifest["version"]), manifest)
    if version not in kept:
        listed = ", ".join(f"{v:,}" for v in sorted(kept)) or "none"
        raise CheckpointError(
            f"no {kind.noun} of version {version:,} in {ckpt_dir}; kept: {listed} "
            f"(config.checkpoint.keep keeps the newest)"
        )
    return kept[version], read_arrays(ckpt_dir, kept[version])


def newest_usable(ckpt_dir: str, check) -> tuple:
    """(manifest, check(manifest)) of the newest checkpoint that passes `check`.

    Each newer checkpoint that fails is named in a warning; when none passes, the
    newest one's CheckpointError is raised.
    """
    candidates, errors = _candidates(ckpt_dir), []
    for path in candidates:
        try:
            manifest = _read_manifest_file(path)
            value = check(manifest)
        except CheckpointError as err:
            errors.append(err)
            continue
        for err in errors:
            logging.warning(
                "learner checkpoint skipped, resuming from an older one (%s): %s",
                os.path.basename(path),
                err,
            )
        manifest["skipped"] = [str(err) for err in errors]
        return manifest, value
    raise errors[0] if errors else _no_checkpoint(ckpt_dir)


def check_compatible(manifest: dict, algorithm: str, template, ckpt_dir: str) -> None:
    """Refuses a checkpoint of another algorithm or of other leaf paths/shapes/dtypes."""
    if manifest.get("algorithm") != algorithm:
        raise CheckpointError(
            f"the checkpoint in {ckpt_dir} was written by algorithm "
            f"{manifest.get('algorithm')!r}, but this config runs {algorithm!r}"
        )
    saved = [(x["path"], tuple(x["shape"]), x["dtype"]) for x in manifest["leaves"]]
    wanted = describe(template)
    if saved == wanted:
        return
    old, new = {p: v for p, *v in saved}, {p: v for p, *v in wanted}
    diffs = [
        f"{p}: checkpoint {_leaf_text(old.get(p))}, config {_leaf_text(new.get(p))}"
        for p in dict.fromkeys([p for p, *_ in wanted] + [p for p, *_ in saved])
        if old.get(p) != new.get(p)
    ]
    raise CheckpointError(
        f"the checkpoint in {ckpt_dir} does not fit this config's {algorithm} learner "
        f"(another network shape, map size or optimizer?); {len(diffs)} leaves differ, e.g.\n  "
        + "\n  ".join(diffs[:4])
    )


def _leaf_text(leaf) -> str:
    return "absent" if leaf is None else f"{leaf[0]} {leaf[1]}"


def load(ckpt_dir: str, algorithm: str, template):
    """(state shaped like `template`, manifest) of the newest checkpoint that passes the
    checksum and shape checks (see `newest_usable`)."""

    def arrays(manifest):
        check_compatible(manifest, algorithm, template, ckpt_dir)
        return read_arrays(ckpt_dir, manifest)

    manifest, leaves = newest_usable(ckpt_dir, arrays)
    return jax.tree.unflatten(jax.tree.structure(template), leaves), manifest


def read_arrays(ckpt_dir: str, manifest: dict) -> list:
    """The leaves (numpy arrays, in the manifest's order) of the npz `manifest` names,
    its SHA-256 checked; CheckpointError naming the file when it is missing or corrupt."""
    path = os.path.join(ckpt_dir, manifest["state_file"])
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as err:
        message = f"checkpoint {path} (named by {MANIFEST}) is missing: {err}"
        raise CheckpointError(message) from None
    if hashlib.sha256(data).hexdigest() != manifest["sha256"]:
        raise CheckpointError(
            f"checkpoint {path} is corrupt: its SHA-256 does not match {MANIFEST}. "
            f"Restore it from a copy, or start a new run"
        )
    with np.load(io.BytesIO(data), allow_pickle=False) as npz:
        return [npz[f"leaf_{i}"] for i in range(len(manifest["leaves"]))]


def _remove_stale(ckpt_dir: str, keep: int, prefix: str) -> None:
    """Deletes all but the newest `keep` checkpoints, and killed writes' temps."""
    pattern = os.path.join(ckpt_dir, f"{prefix}-*.npz")
    names = sorted(glob.glob(pattern), key=written_ms, reverse=True)
    stale = glob.glob(os.path.join(ckpt_dir, f"*{_TMP_SUFFIX}"))
    for npz in names[keep:]:
        stale += [npz, _manifest_name(npz)]
    for path in stale:
        if os.path.exists(path):
            os.remove(path)
