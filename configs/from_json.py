"""A saved config: `--config=configs/from_json.py:<run dir or config.json>`.

What `launch/train.py --resume=<run dir>` loads (the run's own config.json), and
how `launch/compare.py` hands each run its fully resolved config. The saved values
are applied to the base config of its algorithm (`distrl.config.from_dict`), so
they keep their types; a file that is missing, not JSON, or lacks or adds fields
is refused with a ConfigError naming the problem.
"""

import os

from distrl import config as config_lib


def get_config(path: str):
    if os.path.isdir(path):
        path = os.path.join(path, "config.json")
    return config_lib.load_json(path)
