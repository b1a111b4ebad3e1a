"""Stage 8, shared part: the run directory, and resuming a run from it.

Everything a run writes lands in one directory (default `runs/<algorithm>-<time>`):

    .lock                   held (flock) by the live launch, which wrote its PID in it
    config.json             the resolved config; `--resume` reads it back
    result.json             the evaluator's outcome: counts, evaluation, value grid,
                            greedy actions, replay statistics, the reported policy's
                            file; the launcher adds the nodes restarted, the failures
                            that ended the run and the learner's last checkpoint
    logs/<node>.csv         metric rows of actor_<i>, learner, evaluator, replay
    logs/nodes/<group>/<i>  each node process's own output (local_mp), and
                            logs/nodes/launcher the launcher's (starts, deaths,
                            restarts, the stop); a resumed launch writes
                            logs/nodes-2/, logs/nodes-3/...
    tb/<node>/              TensorBoard event files of the same metrics
    checkpoints/learner/    learner checkpoints (see distrl.checkpoints.learner)
    checkpoints/policy/     the params of the policy result.json reports, with their
                            version, saved by the evaluator (see distrl.checkpoints.policy;
                            launch/evaluate.py plays them)
    checkpoints/replay/     Reverb's checkpoints of the replay tables (its newest);
                            checkpoints/replay-kept/ the newest few, kept
                            (see distrl.checkpoints.replay)
    checkpoints/counter.json  the counter's totals, for a restarted counter
    plots/                  learning curves and the learned policy (distrl.analysis.plots)
    failures/<node>.txt     how a node that ended the run failed (first line), and its
                            traceback or last output; failures/restarted/ the same
                            for each node restart
    tmp/                    temp files of launchpad and the nodes (local_mp); empty
                            after a clean exit; tmp/launch-<pid>/ of a killed
                            launcher is removed by the next launch there

A resumed run must keep the config it started with; only the stop criteria and
bookkeeping periods (`RESUMABLE`) may change, e.g. a larger budget to train on.
"""

import contextlib
import fcntl
import os
import re
import shutil
import tempfile
import time

import ml_collections

from distrl import config as config_lib
from distrl import files

LOCK_FILE = ".lock"
CONFIG_FILE = "config.json"
RESULT_FILE = "result.json"
PLOTS_DIR = "plots"
# "off": a finished run draws no plots (sweeps, the test suite: about a CPU second a
# run); launch/plot.py draws them from the run directory's records at any time.
PLOTS_ENV = "DISTRL_PLOTS"
TMP_DIR = "tmp"  # temp files of launchpad and the node processes (local_mp)
NODE_OUTPUT_DIR = os.path.join("logs", "nodes")
# Config keys a resumed run may change: when to stop, how often to log, where it
# and its nodes run.
RESUMABLE = (
    "ray.",
    "budget.",
    "evaluator.target_success",
    "evaluator.target_of_optimal",
    "evaluator.optimal_measure",
    "evaluator.target_return",
    "evaluator.confirm_envs",
    "evaluator.every_seconds",
    "evaluator.every_env_steps",
    "log.",
    "checkpoint.every_seconds",
    "checkpoint.keep",
    "restart.",
    "run_dir",
    "local.",  # the single-process trainer's own settings; unused here
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
    """The config a run was started with (its config.json), typed as a fresh one.

    ConfigError when the file is missing, unreadable, not JSON, or not a whole
    config of this distrl (see `config.from_dict`).
    """
    path = os.path.join(run_dir, CONFIG_FILE)
    if not os.path.isfile(path):
        raise config_lib.ConfigError(f"cannot resume: {path} does not exist (not a run directory?)")
    return config_lib.load_json(path)


def check_writable(run_dir: str) -> None:
    """ConfigError unless `run_dir` is, or can be made, a directory this process writes."""
    path = run_dir
    while not os.path.exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    if not os.path.isdir(path):
        raise config_lib.ConfigError(
            f"run directory {run_dir}: {path} is a file, not a directory; choose another --run_dir"
        )
    if not os.access(path, os.W_OK | os.X_OK):
        raise config_lib.ConfigError(
            f"run directory {run_dir}: {path} is not writable; choose another --run_dir"
        )
    # access() answers from permission bits alone (always yes for root); /proc, /sys or
    # a read-only mount refuse a real directory: make one there, and remove it at once.
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".distrl-probe-", dir=path))
    except OSError as err:
        raise config_lib.ConfigError(
            f"run directory {run_dir}: cannot create a directory in {path} ({err.strerror}); "
            f"choose a --run_dir on a writable file system"
        ) from None


def check_resume(config, run_dir: str) -> None:
    """Refuses a resume whose config differs from the saved one outside RESUMABLE."""
    saved = load_config(run_dir).to_dict()
    diffs = conflicts(saved, config.to_dict())
    if diffs:
        raise config_lib.ConfigError(
            f"--resume={run_dir} continues that run with its saved config, but the given "
            f"config changes {len(diffs)} field(s): " + "; ".join(diffs) + ". Drop those "
            f"overrides, or start a new run; only these may change on resume: "
            f"{', '.join(RESUMABLE)}"
        )


def conflicts(saved: dict, given: dict) -> list:
    """['config.key: old -> new'] for every differing key outside RESUMABLE."""
    a, b = config_lib.flatten(saved), config_lib.flatten(given)
    missing = "(absent)"
    return [
        f"config.{key}: {_show(a.get(key, missing))} -> {_show(b.get(key, missing))}"
        for key in sorted(set(a) | set(b))
        if not key.startswith(RESUMABLE)
        and _plain(a.get(key, missing)) != _plain(b.get(key, missing))
    ]


def _plain(value):
    return list(value) if isinstance(value, tuple) else value


def _show(value) -> str:
    if value == "(absent)":
        return value
    return repr(tuple(value)) if isinstance(value, list) else repr(value)


def write_config(config, run_dir: str) -> None:
    """Creates the run directory and writes the resolved config (run_dir included).

    Every field is written (the agent section holds all of its dataclass's), so
    config.json says exactly what ran. ConfigError when the directory cannot be made.
    """
    config.run_dir = run_dir
    try:
        os.makedirs(run_dir, exist_ok=True)
        files.write_atomic(os.path.join(run_dir, CONFIG_FILE), config.to_json_best_effort(indent=2))
    except OSError as err:
        raise config_lib.ConfigError(f"run directory {run_dir}: {err.strerror}") from None


def node_output_dir(run_dir: str) -> str:
    """Where this launch's node processes write their output: logs/nodes, then -2, -3..."""
    path, attempt = os.path.join(run_dir, NODE_OUTPUT_DIR), 1
    while os.path.exists(path):
        attempt += 1
        path = os.path.join(run_dir, f"{NODE_OUTPUT_DIR}-{attempt}")
    return path


_LAUNCH_DIR = re.compile(r"launch-(\d+)")  # tmp/launch-<launcher pid>/ (program.supervisor)


def remove_dead_launches(run_dir: str) -> list:
    """Removes tmp/launch-<pid>/ of launchers no longer alive (a SIGKILLed launcher leaves
    its node pickles there); returns the paths removed. Called with the run directory's
    lock held: no other launcher of it runs, and a live pid (this one, or one reused by
    another process) is kept anyway."""
    tmp, removed = os.path.join(run_dir, TMP_DIR), []
    for name in sorted(os.listdir(tmp)) if os.path.isdir(tmp) else []:
        match = _LAUNCH_DIR.fullmatch(name)
        if match and not _alive(int(match.group(1))):
            shutil.rmtree(os.path.join(tmp, name), ignore_errors=True)
            removed.append(os.path.join(tmp, name))
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


class RunDirBusy(config_lib.ConfigError):
    """The run directory is held by another live launch."""


@contextlib.contextmanager
def locked(run_dir: str):
    """Holds the run directory's lock for the block: one live program per directory.

    An flock on `<run_dir>/.lock` (released by the kernel however this process
    ends, so a killed launch leaves no stale lock); RunDirBusy, naming the holder's
    PID, while another launch holds it.
    """
    path = os.path.join(run_dir, LOCK_FILE)
    try:
        os.makedirs(run_dir, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as err:
        raise config_lib.ConfigError(
            f"run directory {run_dir}: cannot create its lock file {path} ({err.strerror}); "
            f"choose another --run_dir"
        ) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as err:
        if isinstance(err, BlockingIOError):
            raise _busy(run_dir, fd) from None
        os.close(fd)
        raise config_lib.ConfigError(
            f"run directory {run_dir}: cannot lock {path} ({err.strerror}); choose a --run_dir "
            f"on a file system that supports flock"
        ) from None
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        os.close(fd)


def _busy(run_dir: str, fd: int) -> RunDirBusy:
    """The refusal of a run directory whose lock another launch holds (`fd` is closed)."""
    holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
    os.close(fd)
    return RunDirBusy(
        f"run directory {run_dir} is in use by a live launch (launcher pid {holder}); "
        f"wait for it to end or stop it (kill {holder}) before launching or resuming "
        f"there again"
    )


def plots_at_the_end() -> bool:
    """Whether a finished run draws its plots into PLOTS_DIR ($DISTRL_PLOTS is not "off")."""
    return os.environ.get(PLOTS_ENV, "").lower() != "off"
