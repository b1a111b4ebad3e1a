"""A saved config: `--config=configs/from_json.py:<run dir or config.json>`.

What `launch/train.py --resume=<run dir>` loads (the run's own config.json), and
how `launch/compare.py` hands each run its fully resolved config.
"""

import json
import os

import ml_collections


def get_config(path: str):
    if os.path.isdir(path):
        path = os.path.join(path, "config.json")
    with open(path) as f:
        return ml_collections.ConfigDict(json.load(f))
