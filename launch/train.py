"""Train one distributed experiment: python launch/train.py --config=configs/dqn.py

Flags: `--config` (an ml_collections config file; override any field with
`--config.num_actors=4`, `--config.env.map=8x8`, ...), `--lp_launch_type`
(local_mp: a process per node; test_mt: threads in this process) and
`--terminal` (where node output goes under local_mp). The config is validated
before any process starts. Exit status: 0 when the run ends on its target or a
budget, 1 when it stopped otherwise (a node failed), 2 for a bad config or flag,
130 when interrupted.
"""

import sys

from absl import app, flags
from ml_collections import config_flags

import launchpad  # noqa: F401 - defines --lp_launch_type

from distrl import config as config_lib
from distrl import program

_CONFIG = config_flags.DEFINE_config_file("config", "configs/dqn.py", "Experiment config file.")
_TERMINAL = flags.DEFINE_enum(
    "terminal", "current_terminal", ["current_terminal", "output_to_files"],
    "local_mp: print every node's output here, or keep one file per node.",
)
# Launchpad defines --lp_launch_type (default local_mt); distrl runs local_mp unless told.
flags.FLAGS.set_default("lp_launch_type", "local_mp")


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    config = _CONFIG.value
    launch_type = flags.FLAGS.lp_launch_type
    launch_type = getattr(launch_type, "value", launch_type)
    try:
        result, run_dir = program.run(config, launch_type, _TERMINAL.value)
    except config_lib.ConfigError as err:
        print(f"distrl: bad config: {err}", file=sys.stderr)
        return 2
    except program.NodeFailure as err:
        print(f"distrl: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    if result is None:
        print(f"distrl: the program stopped without a result (see the node output above); "
              f"run directory {run_dir}", file=sys.stderr)
        return 1
    print(f"distrl: run directory {run_dir}")
    if result["stop_reason"] == "stopped":
        return 130
    return 0


if __name__ == "__main__":
    app.run(main)
