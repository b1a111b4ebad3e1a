"""REINFORCE (Monte-Carlo returns, no critic) with an on-policy queue, 4x4 map.

Distributed at the default chunk length T=16: each actor writes a window of its
last `actor.episode_window` chunks in which the steps of whole episodes that end
in the newest chunk are trained (`distrl.agents.episodes`).
"""

from distrl.config import base_config


def get_config():
    config = base_config("reinforce")
    config.learner.batch_chunks = 1  # windows of [W x T, B] per update
    config.learner.prefetch = 0
    config.actor.chunks_per_version = 1
    config.replay.queue_size = 2
    return config
