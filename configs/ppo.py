"""PPO (clipped surrogate, GAE, 4 epochs x 4 minibatches) with an on-policy queue, 4x4 map.

Fresh data: each of the 2 actors acts one chunk per params version and then waits
for the next version (`actor.chunks_per_version`), and the learner reads no batch
ahead (`learner.prefetch=0`), so every batch was acted with the params it updates
(data age 0; docs/decisions.md, "On-policy data is fresh by gating the actors").
"""

from distrl.config import base_config


def get_config():
    config = base_config("ppo")
    config.learner.batch_chunks = 2  # chunks of [T, B] per update: one per actor
    config.learner.prefetch = 0
    config.actor.chunks_per_version = 1
    config.replay.queue_size = 2
    return config
