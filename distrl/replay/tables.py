"""The Reverb tables a pipeline's items go into, and the signature of those items:
the replay node builds the tables, the learner's dataset reads by the signature.
The pipelines say what they want (`distrl.pipelines`); Reverb's names stay here."""

import reverb
import tensorflow as tf

from distrl.replay import TABLE


def signature(example):
    """tf.TensorSpec pytree of one item, from the pipeline's zero example item: what
    actors write, the table holds and the learner reads."""
    return tf.nest.map_structure(lambda x: tf.TensorSpec(x.shape, tf.as_dtype(x.dtype)), example)


def queue_table(max_size: int, signature) -> reverb.Table:
    """A FIFO queue of `max_size` items: each is sampled once, and a full queue blocks
    its writers."""
    return reverb.Table.queue(TABLE, max_size=max_size, signature=signature)


def replay_table(
    *,
    signature,
    max_items: int,
    min_items: int,
    samples_per_insert: float,
    error_buffer: float,
    priority_exponent: float | None,
) -> reverb.Table:
    """A table of at most `max_items` items, the oldest removed first, sampled uniformly
    (or by priority ** `priority_exponent` when it is given) once it holds `min_items`,
    at `samples_per_insert` samples per item inserted within `error_buffer` items."""
    if priority_exponent is None:
        sampler = reverb.selectors.Uniform()
    else:
        sampler = reverb.selectors.Prioritized(priority_exponent)
    limiter = reverb.rate_limiters.SampleToInsertRatio(
        samples_per_insert=samples_per_insert,
        min_size_to_sample=min_items,
        error_buffer=error_buffer,
    )
    return reverb.Table(
        TABLE,
        sampler=sampler,
        remover=reverb.selectors.Fifo(),
        max_size=max_items,
        rate_limiter=limiter,
        signature=signature,
    )
