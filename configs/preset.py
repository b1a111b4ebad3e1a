"""Any preset of distrl.agents.PRESETS with the base defaults: `--config=configs/preset.py:grpo`.

The agent section holds every field of that preset's dataclass; presets without a
file of their own (reinforce, grpo) run this way.
"""

from distrl.config import base_config


def get_config(algorithm: str = "dqn"):
    return base_config(algorithm)
