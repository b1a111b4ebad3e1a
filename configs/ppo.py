"""PPO (clipped surrogate, GAE, 4 epochs x 4 minibatches) with an on-policy queue, 4x4 map."""

from distrl.config import base_config


def get_config():
    config = base_config("ppo")
    config.learner.batch_chunks = 2  # chunks of [T, B] per update
    config.replay.queue_size = 4
    return config
