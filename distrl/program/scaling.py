"""Actors added and removed during a run: the request, its checks, the plan, the record.

`launch/scale.py --run_dir=D --actors=N` asks the run's live launcher for N actors
through a file: it writes `tmp/launch-<launcher pid>/scale.json` (atomically: the
launcher's work directory, which exists only while a launcher of either kind runs
D, `open_work_dir`), and the launcher (the local_mp supervisor, which polls that
directory every 0.1 s for its stop file already, or the Ray launcher's watch loop)
takes it (`serve`), starts or stops actors as `plan` says and appends one line per
change to `<run_dir>/actors.log` (JSON: the count before and after, the actors added
or removed, the request's id, the cause), with one line for every launch too. A Ray
run with `config.ray.actors=auto` writes a line of cause "cluster" for each change
it makes as machines join and leave. A file rather than
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
from distrl import experiment as experiment_lib
from distrl import files, resources
from distrl.records import rundir

REQUEST_FILE = "scale.json"  # in the launcher's work directory, tmp/launch-<pid>/
LAUNCH_FILE = "launch.json"  # in it too: {"launch_type": "local_mp" | "ray"}
LOG_FILE = "actors.log"  # in the run directory: one JSON line per launch and per change


def work_dir(run_dir: str, launcher_pid: int) -> str:
    """A launcher's work directory (local_mp: its node pickles and stop file; both
    kinds: the scale requests)."""
    return os.path.join(run_dir, rundir.TMP_DIR, f"launch-{launcher_pid}")


def open_work_dir(run_dir: str, launch_type: str) -> str:
    """This launcher's work directory, made, with its launch type for `launch/scale.py`."""
    work = work_dir(run_dir, os.getpid())
    os.makedirs(work, exist_ok=True)
    files.write_json(os.path.join(work, LAUNCH_FILE), {"launch_type": launch_type})
    return work


def launch_type(run_dir: str, launcher_pid: int) -> str | None:
    """The launch type of the live launcher `launcher_pid` of `run_dir`; None when it has
    no work directory (a test_mt launch, or one that has ended)."""
    work = work_dir(run_dir, launcher_pid)
    try:
        return files.read_json(os.path.join(work, LAUNCH_FILE))["launch_type"]
    except (OSError, ValueError, KeyError, TypeError):
        return "local_mp" if os.path.isdir(work) else None


def check_count(config, actors: int, local: bool = True) -> str | None:
    """ConfigError unless the run of `config` may run `actors` actors: at least 1, a
    config that validates with that many (e.g. a multiple of an on-policy batch's
    chunks), actors that do not gate on a round of every actor's chunks
    (`actor.chunks_per_version`: the round counts the actors at their start), and,
    `local` (every node on this machine), memory here for them
    (`resources.check_memory`: the bound; a Ray cluster's launcher checks its CPUs,
    `placement.check_fits`). Returns the memory warning when they need more than is
    free now (None when not)."""
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
        experiment = experiment_lib.make(scaled)
    except config_lib.ConfigError as err:
        raise config_lib.ConfigError(f"--actors={actors}: {err}") from None
    if not local:
        return None
    try:
        return resources.check_memory(experiment)
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
    cause: str  # "launch", "request" or "cluster" (config.ray.actors=auto)
    request: str | None = None  # the scale request's id
    error: str | None = None  # a request refused by the launcher (nothing changed)
    bad_input: bool = False  # refused for its count (launch/scale.py exits 2)

    def describe(self) -> str:
        """The launcher's line for it (terminal and log)."""
        if self.error:
            return f"scale request refused: {self.error}"
        moved = [f"added {', '.join(self.added)}"] if self.added else []
        moved += [f"removing {', '.join(self.removed)}"] if self.removed else []
        why = " (the cluster changed)" if self.cause == "cluster" else ""
        return f"actors {self.before} -> {self.actors}{why}: {'; '.join(moved) or 'no change'}"


def index(name: str) -> int:
    """An actor's id from its node name ("actor/3" -> 3)."""
    return int(name.rpartition("/")[2])


def plan(count: int, actors, busy=(), first_out=()) -> tuple[list[str], list[int]]:
    """(names to stop, ids to start) to go from the running `actors` (node names) to
    `count`: the names in `first_out` (e.g. actors whose machine left) first, then the
    highest ids, newest first; added actors take the lowest ids not running, not
    stopped now and not `busy` (removed earlier, still ending). Ids stay 0..N-1 as
    long as nothing but `plan` removes actors."""
    running = sorted(actors, key=index)
    out = [a for a in running if a in first_out]
    kept = [a for a in running if a not in out]
    out += kept[count:][::-1]
    kept = kept[:count]
    taken = {index(a) for a in running} | set(busy)
    added, i = [], 0
    while len(kept) + len(added) < count:
        if i not in taken:
            added.append(i)
        i += 1
    return out, added


def serve(work: str, run_dir: str, run_seconds: float, scale_to, count, say) -> None:
    """Serves the pending scale request in `work`, if any: `scale_to(n, cause, ident)`
    makes the change and returns it (a ConfigError refuses the count: bad input; any
    other error refuses the request; nothing must have changed then), `count()` is the
    actor count now; the change (or refusal) goes to actors.log and `say`."""
    asked = take_request(work)
    if asked is None:
        return
    ident, actors = asked.get("id"), asked.get("actors")
    error, bad_input = asked.get("error"), False
    if error is None and actors < 1:
        error, bad_input = f"actors={actors}: a run needs at least 1 actor", True
    change = None
    if error is None:
        try:
            change = scale_to(actors, "request", ident)
        except config_lib.ConfigError as err:
            error, bad_input = str(err), True
        except Exception as err:  # noqa: BLE001 - a failed start must not end the run
            error = f"{type(err).__name__}: {err}"
    if change is None:
        now = count()
        change = Change(now, now, [], [], "request", ident, error, bad_input)
    note(run_dir, change, run_seconds, say)


def note(run_dir: str, change: Change, run_seconds: float, say) -> None:
    """A change made: one line of actors.log and one for `say`."""
    record(run_dir, change, run_seconds)
    say(change.describe())


def record_launch(run_dir: str, actors: list) -> None:
    """The launch's line of actors.log: the actors (node names) it starts."""
    record(run_dir, Change(len(actors), 0, list(actors), [], "launch"), 0.0)


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
