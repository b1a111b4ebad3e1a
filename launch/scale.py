"""Add or remove actors of a live run: python launch/scale.py --run_dir=D --actors=N

The run's launcher (the local_mp supervisor, or the Ray launcher: on the cluster,
placed by the actor group's resources) starts the actors missing up to N, each with a
new seed, the exploration of its place among N actors and the learner's latest
params, or stops the newest ones (each ends its current rollout and write first);
the learner, the replay and the rest run on. Every change is a line of
`D/actors.log`, and `launch/train.py --resume=D` starts with the count the run
last had (`distrl.program.scaling`). Prints the change and exits 0 once the launcher
made it; 2 in one line for bad input (no such run directory, no live local_mp run
there, N below 1 or beyond what the config or this machine's memory allows), 1
when the launcher refused the request or did not answer within --timeout_s.
"""

import os
import sys
import time

from absl import flags

from distrl import cli
from distrl import config as config_lib
from distrl.program import scaling
from distrl.records import rundir

_RUN_DIR = flags.DEFINE_string("run_dir", None, "The live run's directory.")
_ACTORS = flags.DEFINE_integer("actors", None, "The number of actors the run should have.")
# A Ray launcher may take 30 s to place added actors and as long again to start them.
_TIMEOUT = flags.DEFINE_float("timeout_s", 90.0, "How long to wait for the launcher's answer.")
flags.mark_flags_as_required(["run_dir", "actors"])


def _launcher(run_dir: str) -> tuple[bool, int | None, str | None]:
    """(live, pid, launch type) of the launcher of `run_dir`: the type None when it is
    not live or has no work directory (not a local_mp or Ray launch)."""
    try:
        with rundir.locked(run_dir):
            return False, None, None
    except rundir.RunDirBusy:
        pid = _holder(run_dir)
        return True, pid, None if pid is None else scaling.launch_type(run_dir, pid)


def _check_launch(run_dir: str, launcher: tuple, config) -> None:
    """ConfigError unless a local_mp or Ray launcher runs `run_dir` and takes requests."""
    live, pid, kind = launcher
    if not live:
        raise config_lib.ConfigError(f"run {run_dir} is not live (no launcher holds it)")
    if kind is None:
        raise config_lib.ConfigError(
            f"run {run_dir} is not a local_mp or Ray launch (launcher pid {pid}); only those scale"
        )
    if kind == "ray" and config.ray.actors == "auto":
        raise config_lib.ConfigError(
            f"run {run_dir} follows the Ray cluster (config.ray.actors=auto): its actor "
            f"count is the cluster's, within config.ray.min_actors and max_actors"
        )


def _holder(run_dir: str) -> int | None:
    with open(os.path.join(run_dir, rundir.LOCK_FILE)) as f:
        text = f.read().strip()
    return int(text) if text.isdigit() else None


def main(argv) -> int:
    del argv
    run_dir, actors = _RUN_DIR.value, _ACTORS.value
    try:  # the input first, then whether the run is live
        if not os.path.isfile(os.path.join(run_dir, rundir.CONFIG_FILE)):
            raise config_lib.ConfigError(
                f"--run_dir={run_dir} is not a run directory (no config.json)"
            )
        config = rundir.load_config(run_dir)
        launcher = _launcher(run_dir)
        # The count's bounds: the config's; this machine's memory unless on Ray.
        warning = scaling.check_count(config, actors, local=launcher[2] != "ray")
        _check_launch(run_dir, launcher, config)
        pid = launcher[1]
    except config_lib.ConfigError as err:
        cli.fail(str(err))
    if warning:
        print(f"distrl: {warning}", file=sys.stderr)
    ident = scaling.request(run_dir, pid, actors)
    deadline = time.monotonic() + _TIMEOUT.value
    while (entry := scaling.answer(run_dir, ident)) is None:
        if time.monotonic() > deadline or not os.path.isdir(scaling.work_dir(run_dir, pid)):
            print(f"distrl: the launcher (pid {pid}) did not answer the request", file=sys.stderr)
            return 1
        time.sleep(0.1)
    if entry.get("bad_input"):
        cli.fail(f"the launcher refused the request: {entry['error']}")
    if entry.get("error"):
        print(f"distrl: the launcher refused the request: {entry['error']}", file=sys.stderr)
        return 1
    added = f"; added {', '.join(entry['added'])}" if entry["added"] else ""
    removed = f"; removed {', '.join(entry['removed'])}" if entry["removed"] else ""
    print(f"distrl: actors {entry['before']} -> {entry['actors']}{added}{removed}")
    return 0


if __name__ == "__main__":
    cli.run(main)
