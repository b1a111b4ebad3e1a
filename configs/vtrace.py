"""Actor-critic with V-trace corrections for stale behaviour policies, 4x4 map.

Deliberately asynchronous, so the data is old (what V-trace is for): actors never
wait for new params (`actor.chunks_per_version=0`), a queue of 8 chunks, 4 batches
prefetched and 16 samples in flight, so the data is many updates old (result.json's
`data` reports its age).
"""

from distrl.config import base_config


def get_config():
    config = base_config("vtrace")
    config.learner.batch_chunks = 1
    config.learner.prefetch = 4
    config.learner.max_in_flight = 16
    config.actor.chunks_per_version = 0
    config.replay.queue_size = 8
    return config
