"""Advantage actor-critic (GAE) with an on-policy queue on the 4x4 map."""

from distrl.config import base_config


def get_config():
    config = base_config("a2c")
    config.learner.batch_chunks = 1  # chunks of [T, B] per update
    config.replay.queue_size = 4
    return config
