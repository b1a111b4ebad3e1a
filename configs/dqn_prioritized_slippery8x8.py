"""DQN with prioritized replay on slippery 8x8: configs/dqn_slippery8x8.py's settings
(4 samples per insert, a target refresh every 250 updates) with a prioritized table
(alpha 0.6, beta 0.4 -> 1 over the learning-rate decay's 30,000 updates), for the
pipeline comparison (`launch/compare.py`; docs/decisions.md, "Prioritized replay").
Not measured at these settings (docs/learning.md, "Not measured again").
"""

from distrl import cli


def get_config():
    config = cli.load_file("dqn_slippery8x8")  # the uniform study config, then:
    config.replay.sampler = "prioritized"
    config.replay.priority_exponent = 0.6  # alpha
    config.replay.importance_exponent = 0.4  # beta at the first update
    config.replay.importance_anneal_updates = 30_000  # beta reaches 1 as the lr decay ends
    return config
