"""The learner's reading plan (`Reading`): what a pipeline tells the dataset, with no
Reverb or TensorFlow import, so that the pipelines import without them."""

from typing import NamedTuple


class Reading(NamedTuple):
    """How the learner reads its pipeline's items (`Pipeline.reading`): nothing here
    asks which pipeline it is.

    items_per_batch: Reverb items in one learner batch.
    batches_per_read: batches taken per dataset read and cut into views (a tf.data
      read costs about the same whatever it holds).
    in_flight: samples a dataset worker requests ahead.
    prefetch: batches fetched ahead of the update (0: none).
    consumed: sampling removes the item (a queue). Then every item taken is learned
      from: one worker, items read one by one and batched by `iterate_batches`, so
      a read given up at a timeout loses none, and only what the learner asks for is
      taken. Else (replay) items stay in the table: reads are whole batches, read
      ahead.
    """

    items_per_batch: int
    batches_per_read: int
    in_flight: int
    prefetch: int
    consumed: bool
