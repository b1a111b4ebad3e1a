"""Advantage actor-critic (GAE) with an on-policy queue on the 4x4 map.

Fresh data: each actor acts one chunk per params version, then waits until the
learner has used the round's chunks (`actor.chunks_per_version`); with 2 actors
and one chunk per update, half the batches are 1 update old (mean data age 0.5).
"""

from distrl.config import base_config


def get_config():
    config = base_config("a2c")
    config.learner.batch_chunks = 1  # chunks of [T, B] per update
    config.learner.prefetch = 0
    config.actor.chunks_per_version = 1
    config.replay.queue_size = 2
    return config
