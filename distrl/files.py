"""Atomic file writes: a reader, or a run resumed after a kill, sees the old file or
the new one, never half of one."""

import json
import os


def write_atomic(path: str, data, durable: bool = False) -> None:
    """Writes `data` (str or bytes) to `path` through a temp file and a rename.

    durable: also fsync the file and its directory, so that the rename survives a
    machine crash, not only a process death (checkpoints).
    """
    tmp = path + ".tmp"
    with open(tmp, "wb" if isinstance(data, bytes) else "w") as f:
        f.write(data)
        if durable:
            f.flush()
            os.fsync(f.fileno())
    os.replace(tmp, path)
    if durable:
        dir_fd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def write_json(path: str, value, indent=None) -> None:
    """`value` as JSON (numpy and jax scalars as Python numbers), atomically."""
    write_atomic(path, json.dumps(value, indent=indent, default=_plain))


def read_json(path: str):
    with open(path) as f:
        return json.load(f)


def _plain(x):
    """JSON for what json cannot write itself: numpy / jax numbers and arrays."""
    if hasattr(x, "tolist"):
        return x.tolist()
    raise TypeError(f"{type(x).__name__} is not JSON serializable")
