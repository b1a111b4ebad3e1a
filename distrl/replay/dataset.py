"""The learner's reads: a prefetching Reverb dataset, batched by the pipeline's plan."""

import functools
import operator
import queue
import threading
import time
from collections.abc import Iterator

import jax
import numpy as np
import reverb
import tensorflow as tf
from absl import logging

from distrl.replay import TABLE
from distrl.replay.connection import Connection
from distrl.replay.reading import Reading


def make_dataset(server_address: str, signature, reading: Reading, timeout_ms: int = 500):
    """A prefetching tf.data pipeline of sampled items (numpy pytrees).

    Replay: `ReplaySample` reads of `batches_per_read` batches, leading
    [batches_per_read x items_per_batch] (tf.data batches; a partial read lost at a
    timeout was only sampled, never removed), `prefetch` batches ahead in all.
    Queue (`consumed`): single items, `prefetch` batches' worth buffered, one
    worker: `iterate_batches` batches them so that no consumed chunk is ever
    dropped. On a sampling timeout (nothing to sample for `timeout_ms`) the iterator
    ends, so the learner can check for a stop request and build a new one.
    """
    k = reading.items_per_batch
    ds = reverb.TrajectoryDataset(
        server_address=server_address,
        table=TABLE,
        dtypes=tf.nest.map_structure(lambda s: s.dtype, signature),
        shapes=tf.nest.map_structure(lambda s: s.shape, signature),
        max_in_flight_samples_per_worker=reading.in_flight,
        # One worker: a second one's buffered chunks would be lost when the first
        # times out and the iterator is rebuilt.
        num_workers_per_iterator=1 if reading.consumed else -1,
        rate_limiter_timeout_ms=timeout_ms,
    )
    if reading.consumed:
        return ds.prefetch(reading.prefetch * k) if reading.prefetch else ds
    per_read = reading.batches_per_read
    ds = ds.batch(k * per_read, drop_remainder=True)
    # the read being cut already holds per_read - 1 batches ahead of the update
    ahead = max(0, -(-(reading.prefetch - per_read + 1) // per_read))
    return ds.prefetch(ahead) if ahead else ds


def _cut(read, n: int):
    """A read of n batches -> n batches (views: nothing is copied)."""
    size = len(read.info.key) // n
    views = (operator.itemgetter(slice(i * size, (i + 1) * size)) for i in range(n))
    return [jax.tree.map(view, read) for view in views]


def _stack(samples):
    """K single `ReplaySample`s -> one with a leading [K] dim on every leaf."""
    return jax.tree.map(lambda *xs: np.stack(xs), *samples)


_ENDED = object()  # what `_Pull.get` returns when the dataset's iterator ended


class _Pull:
    """A dataset iterator whose `next()` runs in a thread of its own, one call at a time.

    A lost server blocks `next()` in native code (Reverb's sampler retries until gRPC
    reconnects, seconds after the server is back), so the caller waits for a call with
    a deadline instead and can give up on it (`close`: the thread ends when that call
    returns, and drops its iterator). With `ahead`, the next call starts as soon as a
    result is taken (it runs while the caller uses the sample); without, only when
    asked (a queue's chunks are not taken before the learner wants them).
    """

    def __init__(self, make_iterator, ahead: bool):
        self._make = make_iterator
        self._ahead = ahead
        self._calls = queue.Queue()
        self._results = queue.Queue()
        self._asked = False
        threading.Thread(target=self._loop, name="replay-dataset", daemon=True).start()

    def _loop(self) -> None:
        iterator = None
        while self._calls.get():
            try:
                if iterator is None:
                    iterator = self._make()
                self._results.put((next(iterator), None))
            except StopIteration:  # a sampling timeout may end it, too: a new one next
                iterator = None
                self._results.put((_ENDED, None))
            except Exception as err:  # noqa: BLE001 - handed to the caller
                iterator = None  # a sampling timeout ends the iterator: a new one next
                self._results.put((None, err))

    def get(self, wait_s: float):
        """The next sample; `_ENDED` when the iterator ended; None after `wait_s`
        without either (the call goes on); raises what `next()` raised (a sampling
        timeout: DeadlineExceededError)."""
        if not self._asked:
            self._calls.put(True)
            self._asked = True
        try:
            sample, err = self._results.get(timeout=wait_s)
        except queue.Empty:
            return None
        self._asked = False
        if self._ahead and err is None:
            self._calls.put(True)
            self._asked = True
        if err is not None:
            raise err
        return sample

    def close(self) -> None:
        self._calls.put(False)


def iterate_batches(
    server_address: str,
    signature,
    reading: Reading,
    should_stop,
    timeout_ms: int = 500,
    stall_s: float = 2.0,
    wait_s: float = 0.2,
    connection: Connection | None = None,
) -> Iterator:
    """Yields (ReplaySample batch [items_per_batch], seconds waited) until `should_stop()`.

    `signature` is the items' (`distrl.replay.signature`), `reading` the pipeline's
    plan. Replay reads come `batches_per_read` batches at a time and are yielded one batch
    after another (`should_stop` is checked between them).

    Rebuilds the dataset after each sampling timeout, so waiting for data never
    hides a stop request. Queue items sampled before a timeout are kept and go
    into the next batch: every chunk taken from the queue is learned from (only a
    partial batch pending when the program stops is not).

    The dataset is read through `_Pull`, in slices of `wait_s`. A healthy server
    answers every request within `timeout_ms` (a sample or a sampling timeout);
    when nothing came for `stall_s` and the server is lost to a client on the
    dataset's target (`Connection.lost`), the
    dataset is given up and made anew on the other target form once the server
    answers (`Connection.renew`). A queue's chunks that the given-up dataset had read
    ahead from the restarted server (up to a batch) are then not learned from.
    `connection` (default: one of its own to `server_address`) may be shared with
    the learner's other replay calls: when one of them renewed it first, the
    dataset is made anew on its target without a reconnect of its own.
    """
    batched = not reading.consumed
    k, per_read = reading.items_per_batch, reading.batches_per_read
    if connection is None:
        client = reverb.Client(server_address)
        connection = Connection(client, should_stop, "the learner's dataset")
    pending = []  # queue items sampled but not yet yielded; survives rebuilds
    waited, pull, heard = 0.0, None, time.monotonic()
    try:
        while not should_stop():
            if pull is None:
                address = connection.address
                make = functools.partial(_iterator, address, signature, reading, timeout_ms)
                pull = _Pull(make, ahead=batched)
            start = time.perf_counter()
            try:
                sample = pull.get(wait_s)
            except tf.errors.DeadlineExceededError:
                logging.info("replay: no data for a while; still waiting")
                sample = _ENDED
            waited += time.perf_counter() - start
            if sample is _ENDED:  # the server answered: nothing to sample yet
                heard = time.monotonic()
                continue
            if sample is None:
                if time.monotonic() - heard > stall_s:
                    client = connection.client
                    if address != connection.address or connection.lost(client):
                        pull.close()
                        pull = None
                        renewed = address != connection.address or connection.renew(
                            client, f"no sample for {stall_s:.0f} s"
                        )
                        if not renewed:
                            return
                    heard = time.monotonic()
                continue
            heard = time.monotonic()
            if batched:
                batches = _cut(sample, per_read) if per_read > 1 else [sample]
            else:
                pending.append(sample)
                if len(pending) < k:
                    continue
                batches, pending = [_stack(pending)], []
            for i, batch in enumerate(batches):
                if i and should_stop():
                    return
                yield batch, waited
                waited = 0.0
            heard = time.monotonic()  # the updates took their time, not the server
    finally:
        if pull is not None:
            pull.close()


def _iterator(address: str, signature, reading: Reading, timeout_ms: int):
    return make_dataset(address, signature, reading, timeout_ms).as_numpy_iterator()
