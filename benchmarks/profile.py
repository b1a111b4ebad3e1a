"""Where the time goes: py-spy profiles of the real actor and learner of the stage program.

Runs the stage program of `benchmarks.stages` (actor alone, then learner alone) and,
during each timing window, samples the node's process with py-spy (which must be
installed separately, e.g. `python3 -m venv /tmp/pyspy && /tmp/pyspy/bin/pip install
py-spy`). Prints the functions with the largest inclusive and own share of samples
for each node, and the figures of the window, so every profile comes with the
throughput it explains.

    python -m benchmarks.profile --pyspy=/tmp/pyspy/bin/py-spy --algo=dqn --window=10 \
        [--config.actor.num_envs=256] [--dqn.replay.item_steps=4]

Config overrides as in `benchmarks/run.py`: `--config.<section>.<field>=<value>` for
every algorithm profiled, `--dqn.<...>=<value>` / `--ppo.<...>=<value>` for one.
"""

import collections
import json
import os
import re
import subprocess
import sys
import tempfile
import time

from absl import flags

from benchmarks import common, nodes, stages
from benchmarks.monitor import Monitor
from distrl import cli
from distrl import config as config_lib

_LINE = re.compile(r":\d+\)")  # 'f (file.py:12)' -> 'f (file.py)'


class ProfilingMonitor(Monitor):
    """A Monitor that runs py-spy on the phase's node during each window."""

    def __init__(self, *args, pyspy: str, out_dir: str, **kwargs):
        super().__init__(*args, **kwargs)
        self._pyspy = pyspy
        self._out = out_dir

    def _record(self, seconds: float, replay) -> list:
        pid_file = os.path.join(self._gate_dir, self.phase["name"] + nodes.PID)
        deadline = time.time() + 10
        while not os.path.exists(pid_file) and time.time() < deadline:
            time.sleep(0.1)
        with open(pid_file) as f:
            pid = f.read().strip()
        out = os.path.join(self._out, self.phase["name"] + ".txt")
        spy = subprocess.Popen(
            [
                self._pyspy,
                "record",
                "--pid",
                pid,
                "--nonblocking",
                "--duration",
                str(max(1, int(seconds) - 1)),
                "--rate",
                "250",
                "--format",
                "raw",
                "--output",
                out,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        snapshots = super()._record(seconds, replay)
        spy.wait()
        return snapshots


def top_functions(raw_path: str, count: int = 18):
    """(inclusive, own) lists of (share of samples, 'function (file)') from py-spy raw."""
    inclusive, own, total = collections.Counter(), collections.Counter(), 0
    with open(raw_path) as f:
        for line in f:
            stack, _, n = line.rstrip().rpartition(" ")
            frames = [_LINE.sub(")", frame) for frame in stack.split(";")]
            total += int(n)
            for frame in set(frames):
                inclusive[frame] += int(n)
            own[frames[-1]] += int(n)
    share = lambda c: [(v / max(total, 1), k) for k, v in c.most_common(count)]
    return share(inclusive), share(own)


def _flags():
    values = flags.FlagValues()
    flags.DEFINE_string("pyspy", None, "Path of the py-spy executable.", flag_values=values)
    flags.mark_flag_as_required("pyspy", flag_values=values)
    flags.DEFINE_string("algo", "dqn", "dqn | ppo | dqn,ppo", flag_values=values)
    flags.DEFINE_float("window", 10.0, "Seconds profiled per node.", flag_values=values)
    flags.DEFINE_string(
        "run-dir", "/tmp/distrl-profile", "A new folder in it per run.", flag_values=values
    )
    flags.DEFINE_string(
        "measure_in", None, "Internal: the child that measures, in this folder.", flag_values=values
    )
    return values


def main(argv=None) -> None:
    args = _flags()
    argv = [sys.argv[0], *(sys.argv[1:] if argv is None else argv)]
    given = cli.parse_several(
        args, argv, lambda a: common.configs_of(a.algo.split(",")), usage=__doc__
    )
    try:
        configs = {
            a: stages.bench_config(
                a, 1, 1.0, args.measure_in or "", extra=given.of(a), fixed_params=True
            )
            for a in args.algo.split(",")
        }
    except config_lib.ConfigError as err:
        cli.fail(f"bad config: {err}")
    if args.measure_in:
        _measure(configs, args)
        return
    # A fresh folder: a previous run's gate files would stop the stage nodes at once.
    os.makedirs(args["run-dir"].value, exist_ok=True)
    run_dir = tempfile.mkdtemp(prefix=time.strftime("%Y%m%d-%H%M%S-"), dir=args["run-dir"].value)
    out = os.path.join(run_dir, "monitor.json")
    # In its own session, cut off once measured (as `make bench` does): Launchpad's
    # stop waits on stage nodes that already ended.
    common.run_subprocess(
        [
            sys.executable,
            "-m",
            "benchmarks.profile",
            *argv[1:],
            f"--measure_in={run_dir}",
        ],
        timeout=240 + 4 * args.window * len(configs),
        log_path=os.path.join(run_dir, "program.log"),
        done_file=out,
    )
    if not os.path.exists(out):
        sys.exit(f"profile: no measurement; see {run_dir}/program.log")
    with open(out) as f:
        measured = json.load(f)
    for name, phase in measured["phases"].items():
        algo, kind = name.split("-")
        summarize = stages.summarize_actor if kind == "actor" else stages.summarize_learner
        print(f"\n== {name}: {summarize(phase, configs[algo]) if 'snapshots' in phase else phase}")
        raw = os.path.join(run_dir, name + ".txt")
        if not os.path.exists(raw):
            continue
        inclusive, own = top_functions(raw)
        print("inclusive:")
        for frac, fn in inclusive:
            print(f"  {100 * frac:5.1f}%  {fn}")
        print("own:")
        for frac, fn in own[:10]:
            print(f"  {100 * frac:5.1f}%  {fn}")


def _measure(configs, args) -> None:
    """The child: the stage program, profiled; writes monitor.json in `--measure_in`."""
    run_dir = args.measure_in
    program, counter, replays, plan = stages.stage_program(configs, run_dir, 2.0, args.window)

    def monitor(counter, replays, gate_dir, log_dir=""):
        return ProfilingMonitor(
            counter, replays, gate_dir, log_dir=log_dir, pyspy=args.pyspy, out_dir=run_dir
        )

    out = os.path.join(run_dir, "monitor.json")
    stages.launch_and_measure(program, counter, replays, plan, run_dir, out, monitor_cls=monitor)


if __name__ == "__main__":
    main()
