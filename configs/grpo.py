"""GRPO (PPO's clipped update on group-relative episode returns, no critic), 4x4 map.

Distributed at the default chunk length T=16: the group of an update is every
whole episode that ended in the newest chunk of its windows
(`distrl.agents.episodes`).
"""

from distrl.config import base_config


def get_config():
    config = base_config("grpo")
    config.learner.batch_chunks = 2  # windows of [W x T, B] per update: one per actor
    config.learner.prefetch = 0
    config.actor.chunks_per_version = 1
    config.replay.queue_size = 2
    return config
