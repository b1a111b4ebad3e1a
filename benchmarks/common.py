"""Shared helpers of the benchmarks: configs, timing, subprocesses, counter windows,
the platform a row was measured on and the CSV rows of benchmarks/results/.

Nothing here imports Reverb, Launchpad or TensorFlow, and JAX only where a row names
its device, so every benchmark module (the pure `learner.py` included) can use it;
the configs' functions import `distrl.cli` (which loads the data path) when called.
"""

import csv
import json
import os
import pathlib
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence

from distrl import compile_cache, files

ROOT = pathlib.Path(__file__).resolve().parent.parent

# Every benchmark is an entry point: it uses distrl's compilation cache as
# launch/train.py does (children inherit it).
compile_cache.enable()

# CPU-side processes of the benchmark (Reverb server child, one-thread checks) keep
# TensorFlow quiet; the env of a Launchpad node is set by distrl.program.launcher.
QUIET_ENV = {"TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONUNBUFFERED": "1"}


def load_config(name: str, overrides: dict[str, object] | None = None):
    """configs/<name>.py's config, with dotted-path overrides ('replay.max_size': 10)."""
    from distrl import cli  # noqa: PLC0415 - the data path, for the configs' callers alone

    config = cli.load_file(name)
    cli.apply_overrides(config, overrides or {})
    return config


def configs_of(names) -> dict:
    """{name: configs/<name>.py's config}: what a benchmark's overrides apply to."""
    return {name: load_config(name) for name in names}


def several_overrides(args, argv, usage: str, base: Callable[[object], dict] = lambda a: {}):
    """The overrides of a benchmark that runs the configs `args.configs`, parsed from
    `argv` (`cli.parse_several`: exit 2 with one line for a bad one) and validated on
    each config after `base(args)` (dotted-path overrides of its own, e.g. a map,
    read once the flags are parsed)."""
    from distrl import cli  # noqa: PLC0415 - see load_config
    from distrl import experiment as experiment_lib  # noqa: PLC0415

    def validate(overrides):
        for name in args.configs:
            experiment_lib.make(load_config(name, {**base(args), **overrides.of(name)}))

    return cli.parse_several(
        args, argv, lambda a: configs_of(a.configs), check=validate, usage=usage
    )


def device_fields(device=None) -> dict:
    """{'platform', 'device'} of a row: `device`'s platform ('cpu', 'gpu', 'tpu') and
    kind ('cpu', 'TPU v5 lite'), by default the first device of this process's JAX
    default backend, i.e. what its jitted code ran on."""
    import jax  # noqa: PLC0415 - only where a row is written

    device = device or jax.devices()[0]
    return {"platform": device.platform, "device": device.device_kind}


def emit_row(row: dict, out: str | None, shown: dict | None = None) -> None:
    """Prints `shown` (default: the row) as one JSON line; appends the row to `out`.
    Both get the platform and device of this process (`device_fields`); so does the
    caller's row, in place, so that what it keeps is what was written."""
    fields = device_fields()
    row.update(fields)
    print(json.dumps(row if shown is None else {**shown, **fields}), flush=True)
    if out:
        with open(out, "a") as f:
            f.write(json.dumps(row) + "\n")


def algo_overrides(args, argv, usage: str) -> dict:
    """The overrides of a benchmark that runs one config (`--algo`), parsed from
    `argv` with its own flags `args` and validated on that config (`cli.parse_several`:
    exit 2 with one line for a bad one)."""
    from distrl import cli  # noqa: PLC0415 - see load_config
    from distrl import experiment as experiment_lib  # noqa: PLC0415

    def validate(overrides):
        experiment_lib.make(load_config(args.algo, overrides.of(args.algo)))

    given = cli.parse_several(
        args, argv, lambda a: configs_of([a.algo]), check=validate, usage=usage
    )
    return given.of(args.algo)


def measure_rate(
    step: Callable[[], object],
    seconds: float,
    repeats: int = 5,
    sync: Callable[[object], object] = lambda x: x,
    cpu: dict | None = None,
) -> float:
    """Calls of `step` per second: the median over `repeats` slices of the time.

    `step()` runs once before timing (compilation); `sync(result)` waits for the
    last result of a slice (e.g. `jax.block_until_ready`), so asynchronous dispatch
    cannot flatter a slice. The median keeps one slice stolen by another process on
    the shared machine from moving the figure. `cpu`, if given, gets 'step': this
    process's CPU seconds per call (all its threads; the median of the slices).
    """
    return measure_rates({"step": (step, sync)}, seconds, repeats, cpu)["step"]


def measure_rates(steps: dict, seconds: float, repeats: int = 5, cpu: dict | None = None) -> dict:
    """{name: calls per second} of several `steps` ({name: (step, sync)}, as
    `measure_rate` takes one), timed in alternating slices, `seconds` each in all: a
    ratio of two of them is then measured under the same load, even as it changes.
    `cpu`, if given, gets {name: the process's CPU seconds per call}."""
    for step, sync in steps.values():
        sync(step())
    rates = {name: [] for name in steps}
    cpu_per_call = {name: [] for name in steps}
    for _ in range(repeats):
        for name, (step, sync) in steps.items():
            calls, start, cpu_start, out = 0, time.perf_counter(), time.process_time(), None
            while True:
                out = step()
                calls += 1
                if time.perf_counter() - start >= seconds / repeats:
                    break
            sync(out)
            rates[name].append(calls / (time.perf_counter() - start))
            cpu_per_call[name].append((time.process_time() - cpu_start) / calls)
    if cpu is not None:
        cpu.update({name: statistics.median(c) for name, c in cpu_per_call.items()})
    return {name: statistics.median(r) for name, r in rates.items()}


def run_subprocess(
    cmd: Sequence[str],
    timeout: float,
    log_path: str,
    env: dict[str, str] | None = None,
    done_file: str | None = None,
    grace: float = 5.0,
    watch: Sequence[str] = (),
    on_poll: Callable[[dict, float, int], None] | None = None,
) -> dict[str, object]:
    """Runs `cmd` from the repo root in its own session; returns rc, wall seconds, timed_out.

    Output goes to `log_path`. On timeout the whole session (every process the command
    started, e.g. Launchpad nodes) is killed. With `done_file`, the command counts as
    finished `grace` seconds after that file appears, and whatever still runs is
    killed then (used to cut a program's slow shutdown out of the benchmark's time).
    `watch`: paths whose first appearance is timed (seconds after the start, in
    'seen'), e.g. the first log row and the result of a run. `on_poll(seen, elapsed,
    pid)` is called at every poll (every 0.05 s) while the command runs.
    """
    full_env = dict(os.environ, PYTHONPATH=str(ROOT), **QUIET_ENV, **(env or {}))
    start = time.perf_counter()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            list(cmd),
            cwd=ROOT,
            env=full_env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        rc, timed_out, done_at, seen = None, False, None, {}
        while rc is None:
            rc = proc.poll()
            now = time.perf_counter()
            for path in watch:
                if path not in seen and os.path.exists(path):
                    seen[path] = now - start
            if rc is not None:
                break
            if on_poll is not None:
                on_poll(seen, now - start, proc.pid)
            if done_file and done_at is None and os.path.exists(done_file):
                done_at = now
            if now - start > timeout or (done_at is not None and now - done_at > grace):
                timed_out = done_at is None
                kill_session(proc.pid)
                rc = proc.wait()
                break
            time.sleep(0.05)
    wall = time.perf_counter() - start
    kill_session(proc.pid)  # stragglers of a node that outlived the launcher
    return {"rc": rc, "wall": wall, "timed_out": timed_out, "log": log_path, "seen": seen}


def kill_session(sid: int) -> None:
    """SIGKILLs every process of session `sid` (the ones a subprocess started)."""
    try:
        os.killpg(sid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def python_cmd(module: str, *args: str) -> list[str]:
    """[python, -m, module, args...] with this interpreter."""
    return [sys.executable, "-m", module, *args]


def rate_between_changes(times: Sequence[float], values: Sequence[float]) -> float | None:
    """Rate of a lumpy counter over a window, from the first to the last change seen.

    Nodes send counts in lumps every ~0.5 s; measuring between two lump arrivals
    covers whole report periods, so the rate is not off by a lump at either end.
    Returns None when fewer than two changes were seen.
    """
    changes = [i for i in range(1, len(values)) if values[i] != values[i - 1]]
    if len(changes) < 2:
        return None
    first, last = changes[0], changes[-1]
    return (values[last] - values[first]) / max(times[last] - times[first], 1e-9)


def delta(snapshots: Sequence[dict[str, float]], key: str) -> float:
    """Last minus first value of `key` over a list of counter snapshots."""
    return snapshots[-1].get(key, 0.0) - snapshots[0].get(key, 0.0)


def head_commit() -> tuple[str, bool]:
    """(HEAD's short hash, whether tracked files have uncommitted changes)."""
    git = ["git", "-C", str(ROOT)]
    head = subprocess.run([*git, "rev-parse", "--short=7", "HEAD"], capture_output=True, text=True)
    status = subprocess.run(
        [*git, "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True
    )
    return head.stdout.strip(), bool(status.stdout.strip())


def append_csv(path: str, columns, rows) -> None:
    """Appends `rows` (dicts) to the CSV at `path`, with the header if it is new; an
    existing file must have exactly these columns."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    new = not os.path.exists(path)
    if not new:
        with open(path, newline="") as f:
            header = next(csv.reader(f), [])
        if tuple(header) != tuple(columns):
            raise SystemExit(f"{path}: columns {header} are not {list(columns)}")
    with open(path, "a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(columns), lineterminator="\n")
        if new:
            writer.writeheader()
        writer.writerows(rows)


def read_json(path: str):
    """The JSON at `path`, or None if it does not exist (the run did not get there)."""
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def write_json(path: str, value) -> None:
    """Writes atomically, so a reader never sees half a file."""
    files.write_atomic(path, json.dumps(value, indent=2, default=float))
