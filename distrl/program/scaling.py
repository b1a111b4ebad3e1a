"""Actors added and removed during a local_mp run: the request, its checks, the record.

`launch/scale.py --run_dir=D --actors=N` asks the run's live launcher for N actors
through a file: it writes `tmp/launch-<launcher pid>/scale.json` (atomically: the
supervisor's work directory, which exists only while a local_mp launcher
supervises D), and the supervisor, which polls that directory every 0.1 s for its
stop file already, takes it, starts or stops actors and appends one line per change
to `<run_dir>/actors.log` (JSON: the count before and after, the actors added or
removed, the request's id), with one line for every launch too. A file rather than
a socket or RPC: no port, no server in the launcher, nothing to find, and the run
directory's lock already says whether the run is live; a request is whole or absent
(a rename), and the record outlives the launcher, so `--resume` starts the count the
run was scaled to (`current_count`).
"""

import dataclasses
import json
import os
import time
import uuid

from distrl import config as config_lib
from distrl import files, resources, rundir

REQUEST_FILE = "scale.json"  # in the supervisor's work directory, tmp/launch-<pid>/
LOG_FILE = "actors.log"  # in the run directory: one JSON line per launch and per change


def work_dir(run_dir: str, launcher_pid: int) -> str:
    """The local_mp supervisor's work directory (its node pickles, stop file, requests)."""
    return os.path.join(run_dir, rundir.TMP_DIR, f"launch-{launcher_pid}")


def check_count(config, actors: int) -> str | None:
    """ConfigError unless the run of `config` may run `actors` actors: at least 1, a
    config that validates with that many (e.g. a multiple of an on-policy batch's
    chunks), actors that do not gate on a round of every actor's chunks
    (`actor.chunks_per_version`: the round counts the actors at their start), and
    memory on this machine for them (`resources.check_memory`: the bound). Returns
    the memory warning when they need more than is free now (None when not)."""
    if actors < 1:
        raise config_lib.ConfigError(f"--actors={actors}: a run needs at least 1 actor")
    if config.actor.chunks_per_version > 0:
        raise config_lib.ConfigError(
            f"--actors: this run gates its actors (config.actor.chunks_per_version="
            f"{config.actor.chunks_per_version}: rounds of every actor's chunks), which a "
            f"changing count would stall; scale a run without the gate"
        )
    scaled = config.copy_and_resolve_references()
    scaled.num_actors = actors
    try:
        config_lib.validate(scaled)
    except config_lib.ConfigError as err:
        raise config_lib.ConfigError(f"--actors={actors}: {err}") from None
    try:
        return resources.check_memory(scaled)
    except config_lib.ConfigError as err:
        raise config_lib.ConfigError(f"--actors={actors}: {err}") from None


def request(run_dir: str, launcher_pid: int, actors: int) -> str:
    """Asks the launcher `launcher_pid` of `run_dir` for `actors` actors; the request's id."""
    ident = uuid.uuid4().hex[:12]
    path = os.path.join(work_dir(run_dir, launcher_pid), REQUEST_FILE)
    files.write_json(path, {"actors": actors, "id": ident, "asked_at": time.time()})
    return ident


def take_request(work: str) -> dict | None:
    """The pending request in the supervisor's work directory, removed; None when none
    (or one that is not a request: named in its "error")."""
    path = os.path.join(work, REQUEST_FILE)
    if not os.path.exists(path):
        return None
    try:
        asked = files.read_json(path)
    except (OSError, ValueError) as err:
        asked = {"error": f"unreadable request ({err})"}
    finally:
        try:
            os.remove(path)
        except FileNotFoundError:
            pass
    if not isinstance(asked, dict) or not isinstance(asked.get("actors"), int):
        return {"error": f"not a request: {asked!r}", "id": None}
    return asked


@dataclasses.dataclass
class Change:
    """One line of actors.log."""

    actors: int  # the count after it
    before: int  # the count before it (0 at a launch)
    added: list  # node names started
    removed: list  # node names stopped
    cause: str  # "launch", "resume" or "request"
    request: str | None = None  # the scale request's id
    error: str | None = None  # a request refused by the launcher (nothing changed)


def record(run_dir: str, change: Change, run_seconds: float) -> dict:
    """Appends `change` to actors.log (one line, written whole); returns the entry."""
    entry = {"at": time.time(), "run_seconds": round(run_seconds, 1), **dataclasses.asdict(change)}
    with open(os.path.join(run_dir, LOG_FILE), "a") as f:
        f.write(json.dumps(entry) + "\n")
    return entry


def history(run_dir: str) -> list[dict]:
    """The entries of actors.log, oldest first (a torn last line is skipped)."""
    path = os.path.join(run_dir, LOG_FILE)
    entries = []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                try:
                    entries.append(json.loads(line))
                except ValueError:
                    continue
    return entries


def current_count(run_dir: str) -> int | None:
    """The actor count the run last ran with (actors.log), or None without a record."""
    counts = [e["actors"] for e in history(run_dir) if not e.get("error") and e["actors"] > 0]
    return counts[-1] if counts else None


def answer(run_dir: str, ident: str) -> dict | None:
    """The actors.log entry that answers request `ident`, once the launcher wrote it."""
    return next((e for e in history(run_dir) if e.get("request") == ident), None)
