"""Train one distributed experiment: python launch/train.py --config=configs/dqn.py

Flags: `--config` (an ml_collections config file; override any field with
`--config.num_actors=4`, `--config.env.map=8x8`, ...), `--run_dir` (where the run
writes everything; default runs/<algorithm>-<time>), `--resume=<run dir>`
(continue a stopped or killed run from its last checkpoint, with its saved
config; only budgets, the target and logging periods may be overridden),
`--lp_launch_type` (local_mp: a process per node; ray: each node on a node of the
Ray cluster at `--ray_address`; test_mt: threads in this process) and `--terminal`
(local_mp: output_to_files keeps each node's output in
<run_dir>/logs/nodes/ and shows one progress line here; current_terminal prints
every node's output here, for debugging). The config, and a checkpoint to
resume, are checked before any node starts. A node that dies is restarted
(`config.restart`: 3 times each, by default); `--fail_fast` stops the run at the
first death instead. Exit status: 0 when the run ends on its target or a budget, 1
when it stopped otherwise (a node failed beyond its restarts), 2 for a bad config,
flag or checkpoint, 130 when interrupted.
"""

import json
import os
import pathlib
import sys

from distrl import compile_cache
from distrl.program import bindhost, nodeenv, zygote

_HELP = ("--help", "-h", "-?", "--helpfull", "--helpshort", "--helpxml")
# Set across this launcher's exec of itself with the bind shim (`_preloaded_parent`):
# its own LD_PRELOAD before that (JSON: null when it had none), put back at once.
_OWN_PRELOAD = "DISTRL_LAUNCHER_LD_PRELOAD"
_REEXECUTED = _OWN_PRELOAD in os.environ
if _REEXECUTED:
    _own = json.loads(os.environ.pop(_OWN_PRELOAD))
    if _own is None:
        os.environ.pop("LD_PRELOAD", None)
    else:
        os.environ["LD_PRELOAD"] = _own


def _parent_env() -> dict:
    """The preloaded parent's environment: what every node shares (the compilation
    cache, the bind shim, nodeenv.shared)."""
    return {**os.environ, **nodeenv.shared(), **bindhost.environment(bindhost.LOOPBACK)}


def _preloaded_parent(argv) -> bool:
    """A local_mp run's nodes are forks of the preloaded parent, whose imports take
    seconds of CPU. When this process's environment is the parent's in what is read
    at exec and import (`zygote.unforkable_here`), the parent is forked from this
    process after its imports (True: `zygote.fork_early`), and nothing imports the
    stack twice. When only the bind shim is missing (LD_PRELOAD acts at exec), this
    process first executes itself again with the shim loaded (which changes nothing in
    a process without DISTRL_BIND_HOST) and its own LD_PRELOAD back. Otherwise the
    parent is started here, before this launcher's own imports (as long again): the two
    import at once on two cores.
    A parent started either way only imports until the supervisor adopts it: a bad
    flag or config kills and reaps it before this process exits
    (`zygote.discard_early`). None is started when this process has its imports
    behind it already (a fork of a warm interpreter, as in the tests)."""
    launch_type = "local_mp"
    for i, arg in enumerate(argv):
        if arg.startswith("--lp_launch_type="):
            launch_type = arg.partition("=")[2]
        elif arg == "--lp_launch_type" and i + 1 < len(argv):
            launch_type = argv[i + 1]
    if launch_type != "local_mp" or zygote.turned_off() or any(a in _HELP for a in argv):
        return False
    if "jax" in sys.modules:  # the stack imported already (a fork of a warm interpreter)
        return False
    compile_cache.enable()
    env = _parent_env()
    unfit = zygote.unforkable_here(env)
    if not unfit:
        return True
    plain = bindhost.HOST_ENV not in os.environ and __name__ == "__main__"
    if unfit == ["LD_PRELOAD"] and plain and not _REEXECUTED:
        own = json.dumps(os.environ.get("LD_PRELOAD"))
        os.execve(
            sys.executable,
            sys.orig_argv,
            {**os.environ, "LD_PRELOAD": env["LD_PRELOAD"], _OWN_PRELOAD: own},
        )
    zygote.start_early(env)
    return False


_FORK_PARENT = _preloaded_parent(sys.argv)

# The launcher's own imports (TensorFlow and JAX, via rlax and Reverb), after the start.
import launchpad  # noqa: E402, F401 - defines --lp_launch_type
from absl import flags  # noqa: E402
from ml_collections import config_flags  # noqa: E402

from distrl import checkpoints, cli  # noqa: E402
from distrl import config as config_lib  # noqa: E402
from distrl.program import errors, launcher  # noqa: E402
from distrl.records import results, rundir  # noqa: E402

if _FORK_PARENT:  # before this launcher does anything but import
    zygote.fork_early(_parent_env())

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _resume_arg(argv):
    """The --resume value, read before flags are parsed (it decides --config's default)."""
    for i, arg in enumerate(argv):
        if arg.startswith("--resume="):
            return arg.split("=", 1)[1]
        if arg == "--resume" and i + 1 < len(argv):
            return argv[i + 1]
    return None


def _default_config(resume_dir) -> str:
    """configs/dqn.py, or the saved config of the run to resume (its config.json)."""
    if resume_dir and os.path.exists(os.path.join(resume_dir, "config.json")):
        return f"{ROOT / 'configs' / 'from_json.py'}:{os.path.abspath(resume_dir)}"
    return "configs/dqn.py"


_CONFIG = cli.define_config(_default_config(_resume_arg(sys.argv)))
_RUN_DIR = flags.DEFINE_string("run_dir", None, "Run directory (same as --config.run_dir).")
_RESUME = flags.DEFINE_string(
    "resume", None, "Continue the run in this directory from its last checkpoint."
)
# Restarts are on by default (config.restart); debugging wants the first death to stop
# the run, with its traceback, at once: one flag rather than a field to look up.
_FAIL_FAST = flags.DEFINE_bool(
    "fail_fast",
    False,
    "Stop the run at the first node death, without restarts (for debugging): the same as "
    "--config.restart.max_per_node=0.",
)
_TERMINAL = flags.DEFINE_enum(
    "terminal",
    "output_to_files",
    ["output_to_files", "current_terminal"],
    "local_mp: node output to <run_dir>/logs/nodes/ and a progress line here, "
    "or every node's output printed here.",
)
# Launchpad defines --lp_launch_type (default local_mt) with its own launchers only;
# distrl runs local_mp unless told, and adds "ray" (distrl.program.ray.cluster).
flags.DEFINE_string(  # a string: distrl's own check names the valid ones (exit 2)
    "lp_launch_type",
    "local_mp",
    f"One of {config_lib.LAUNCH_TYPES}. local_mp: a process per node on this machine; "
    "ray: each node on a node of a Ray cluster (--ray_address); test_mt: threads here.",
    allow_override=True,
)
_RAY_ADDRESS = flags.DEFINE_string(
    "ray_address",
    "auto",
    "--lp_launch_type=ray: the cluster's head, HOST:PORT (as `ray start --head` printed), "
    "or auto (the cluster this machine joined).",
)


def _config():
    """(config, resume?) from the flags; ConfigError for contradicting ones."""
    config, resume = cli.load(_CONFIG), _RESUME.value
    if resume is not None and not resume.strip():
        raise config_lib.ConfigError("--resume= is empty; give the run directory to continue")
    if _RUN_DIR.value is not None and not _RUN_DIR.value.strip():
        raise config_lib.ConfigError(
            "--run_dir= is empty; give a directory, or leave the flag out for "
            "runs/<algorithm>-<time>"
        )
    if resume:
        if not os.path.exists(os.path.join(resume, "config.json")):
            raise config_lib.ConfigError(
                f"cannot resume: {os.path.join(resume, 'config.json')} does not exist "
                f"(not a run directory?)"
            )
        if _RUN_DIR.value and os.path.abspath(_RUN_DIR.value) != os.path.abspath(resume):
            raise config_lib.ConfigError("--run_dir and --resume name different directories")
        config.run_dir = os.path.abspath(resume)
    elif _RUN_DIR.value:
        if config.run_dir and os.path.abspath(config.run_dir) != os.path.abspath(_RUN_DIR.value):
            raise config_lib.ConfigError("--run_dir and --config.run_dir differ; give one")
        config.run_dir = _RUN_DIR.value
    if _FAIL_FAST.value:
        given = config_flags.get_override_values(flags.FLAGS["config"]).get("restart.max_per_node")
        if given:
            raise config_lib.ConfigError(
                f"--fail_fast and --config.restart.max_per_node={given} contradict; give one "
                f"(--fail_fast is --config.restart.max_per_node=0)"
            )
        config.restart.max_per_node = 0  # recorded so in config.json: what ran
    return config, bool(resume)


# What ends a launch with a message instead of a result: (error, message prefix,
# exit status); the first that matches wins (a CheckpointError is a ConfigError).
_EXITS = (
    (checkpoints.store.CheckpointError, "cannot resume: ", cli.BAD_INPUT),
    (rundir.RunDirBusy, "", cli.BAD_INPUT),
    (config_lib.ConfigError, "bad config: ", cli.BAD_INPUT),
    (errors.LaunchError, "cannot launch: ", 1),
    (errors.NodeFailure, "", 1),
)
_ERRORS = tuple(kind for kind, _, _ in _EXITS)


def main(argv):
    del argv  # cli.run refuses positional arguments
    launch_type = flags.FLAGS.lp_launch_type
    launch_type = getattr(launch_type, "value", launch_type)
    try:
        config, resume = _config()
        result, run_dir = launcher.run(
            config, launch_type, _TERMINAL.value, resume=resume, ray_address=_RAY_ADDRESS.value
        )
    except _ERRORS as err:
        prefix, status = next((p, s) for kind, p, s in _EXITS if isinstance(err, kind))
        print(f"distrl: {prefix}{err}", file=sys.stderr)
        return status
    except KeyboardInterrupt:
        return 130
    if result is None:
        print(
            f"distrl: the program stopped without a result (see the node output in "
            f"{run_dir}/logs/); run directory {run_dir}",
            file=sys.stderr,
        )
        return 1
    # Node output printed here already holds the evaluator's summary.
    here = launch_type == "test_mt" or _TERMINAL.value == "current_terminal"
    if here:  # the learner's last checkpoint was written after that summary
        print("\n".join([*results.on_disk(result, run_dir), f"distrl: run directory {run_dir}"]))
    else:
        print(results.summary(result, run_dir))
    return 130 if result["stop_reason"] == "stopped" else 0


if __name__ == "__main__":
    cli.run(main)
