"""Stage 8, shared part: the run directory, and resuming a run from it.

Everything a run writes lands in one directory (default `runs/<algorithm>-<time>`):

    .lock                   held (flock) by the live launch, which wrote its PID in it
    config.json             the resolved config; `--resume` reads it back
    result.json             the evaluator's outcome: counts, evaluation, value grid,
                            greedy actions, replay statistics; the launcher adds
                            the nodes restarted and the failures that ended the run
    logs/<node>.csv         metric rows of actor_<i>, learner, evaluator, replay
    logs/nodes/<group>/<i>  each node process's own output (local_mp), and
                            logs/nodes/launcher the launcher's (starts, deaths,
                            restarts, the stop); a resumed launch writes
                            logs/nodes-2/, logs/nodes-3/...
    tb/<node>/              TensorBoard event files of the same metrics
    checkpoints/learner/    learner checkpoints (see distrl.checkpoint)
    checkpoints/replay/     Reverb's checkpoints of the replay tables (its newest);
                            checkpoints/replay-kept/ the newest few, kept
                            (see distrl.replay_checkpoint)
    checkpoints/counter.json  the counter's totals, for a restarted counter
    plots/                  learning curves and the learned policy (distrl.analysis.plots)
    failures/<node>.txt     how a node that ended the run failed (first line), and its
                            traceback or last output; failures/restarted/ the same
                            for each node restart
    tmp/                    temp files of launchpad and the nodes (local_mp); empty
                            after a clean exit, leftovers of a killed launch

A resumed run must keep the config it started with; only the stop criteria and
bookkeeping periods (`RESUMABLE`) may change, e.g. a larger budget to train on.
"""

import contextlib
import fcntl
import json
import os
import time

import ml_collections

from distrl import config as config_lib

LOCK_FILE = ".lock"
CONFIG_FILE = "config.json"
RESULT_FILE = "result.json"
PLOTS_DIR = "plots"
TMP_DIR = "tmp"  # temp files of launchpad and the node processes (local_mp)
NODE_OUTPUT_DIR = os.path.join("logs", "nodes")
# Config keys a resumed run may change: when to stop, how often to log, where it
# and its nodes run.
RESUMABLE = (
    "ray.",
    "budget.",
    "evaluator.target_success",
    "evaluator.every_seconds",
    "log.",
    "checkpoint.every_seconds",
    "checkpoint.keep",
    "restart.",
    "run_dir",
)


def resolve(config) -> str:
    """The absolute run directory of `config` (a fresh timestamped one if unset)."""
    path = config.run_dir or os.path.join(
        "runs", f"{config.algorithm}-{time.strftime('%Y%m%d-%H%M%S')}"
    )
    return os.path.abspath(path)


def check_fresh(run_dir: str) -> None:
    """Refuses to start a new run on top of an earlier one's logs or checkpoints."""
    earlier = [
        name
        for name in (RESULT_FILE, "logs", "checkpoints")
        if os.path.exists(os.path.join(run_dir, name))
    ]
    if earlier:
        raise config_lib.ConfigError(
            f"run directory {run_dir} already holds a run ({', '.join(earlier)}); "
            f"continue it with --resume={run_dir}, or choose another --run_dir"
        )


def load_config(run_dir: str) -> ml_collections.ConfigDict:
    """The config a run was started with (its config.json)."""
    path = os.path.join(run_dir, CONFIG_FILE)
    if not os.path.exists(path):
        raise config_lib.ConfigError(f"cannot resume: {path} does not exist (not a run directory?)")
    with open(path) as f:
        return ml_collections.ConfigDict(json.load(f))


def check_resume(config, run_dir: str) -> None:
    """Refuses a resume whose config differs from the saved one outside RESUMABLE."""
    saved = load_config(run_dir).to_dict()
    given = json.loads(config.to_json_best_effort())
    diffs = conflicts(saved, given)
    if diffs:
        raise config_lib.ConfigError(
            f"--resume={run_dir} continues that run with its saved config, but the "
            f"given config changes it:\n  " + "\n  ".join(diffs) + "\nDrop those "
            f"overrides, or start a new run. Only these may change on resume: "
            f"{', '.join(RESUMABLE)}"
        )


def conflicts(saved: dict, given: dict) -> list:
    """['config.key: saved X, given Y'] for every differing key outside RESUMABLE."""
    a, b = _flatten(saved), _flatten(given)
    missing = object()
    return [
        f"config.{key}: saved {a.get(key, '(absent)')!r}, given {b.get(key, '(absent)')!r}"
        for key in sorted(set(a) | set(b))
        if not key.startswith(RESUMABLE) and a.get(key, missing) != b.get(key, missing)
    ]


def write_config(config, run_dir: str) -> None:
    """Creates the run directory and writes the resolved config (run_dir included)."""
    os.makedirs(run_dir, exist_ok=True)
    config.run_dir = run_dir
    tmp = os.path.join(run_dir, CONFIG_FILE + ".tmp")
    with open(tmp, "w") as f:
        f.write(config.to_json_best_effort(indent=2))
    os.replace(tmp, os.path.join(run_dir, CONFIG_FILE))


def node_output_dir(run_dir: str) -> str:
    """Where this launch's node processes write their output: logs/nodes, then -2, -3..."""
    path, attempt = os.path.join(run_dir, NODE_OUTPUT_DIR), 1
    while os.path.exists(path):
        attempt += 1
        path = os.path.join(run_dir, f"{NODE_OUTPUT_DIR}-{attempt}")
    return path


class RunDirBusy(config_lib.ConfigError):
    """The run directory is held by another live launch."""


@contextlib.contextmanager
def locked(run_dir: str):
    """Holds the run directory's lock for the block: one live program per directory.

    An flock on `<run_dir>/.lock` (released by the kernel however this process
    ends, so a killed launch leaves no stale lock); RunDirBusy, naming the holder's
    PID, while another launch holds it.
    """
    os.makedirs(run_dir, exist_ok=True)
    fd = os.open(os.path.join(run_dir, LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
        os.close(fd)
        raise RunDirBusy(
            f"run directory {run_dir} is in use by a live launch (launcher pid {holder}); "
            f"wait for it to end or stop it (kill {holder}) before launching or resuming "
            f"there again"
        ) from None
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        os.close(fd)


def add_to_result(run_dir: str, **fields) -> None:
    """Adds `fields` to result.json; without one (no evaluator outcome), writes one
    whose stop_reason is "node_failed" when `fields` holds failures."""
    path = os.path.join(run_dir, RESULT_FILE)
    if os.path.exists(path):
        with open(path) as f:
            result = json.load(f)
    elif fields.get("failures"):
        result = dict(stop_reason="node_failed")
    else:
        return
    result.update(fields)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(result, f, indent=2)
    os.replace(tmp, path)


def _flatten(tree: dict, prefix: str = "") -> dict:
    flat = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat
