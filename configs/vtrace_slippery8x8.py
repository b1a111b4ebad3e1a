"""V-trace actor-critic on slippery 8x8, asynchronous as configs/vtrace.py (actors
never wait for new params, so data is several updates old), with A2C's slippery
8x8 settings: [16, 16] chunks, one per update, lr 2e-3 decaying to 1e-5 over
12,000 updates, discount 0.99; for the pipeline comparison (`launch/compare.py`).
"""

from configs.bases import slippery_8x8_to_optimum


def get_config():
    config = slippery_8x8_to_optimum("vtrace")
    config.agent.learning_rate = 2e-3
    config.agent.learning_rate_decay_steps = 12_000  # updates
    config.actor.num_envs = 16
    config.actor.chunks_per_version = 0  # never wait: the data ages, V-trace corrects
    config.learner.batch_chunks = 1  # chunks of [T, B] per update
    config.learner.prefetch = 4
    config.learner.max_in_flight = 16
    config.replay.queue_size = 8
    return config
