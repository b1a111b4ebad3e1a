"""Stage 5 of the data flow: Reverb tables, signatures, writers and datasets.

The one module that knows Reverb's API. The pipelines (`agents.Pipeline`) share it:
- REPLAY (DQN): a table of items that each hold the B (n-step) transitions of one
  time step, `QTransition` [B]; uniform or prioritized sampling, FIFO removal and a
  `SampleToInsertRatio` rate limiter. A learner batch of N transitions is N / B items.
- CHUNKS and EPISODES (A2C, V-trace, PPO; REINFORCE, GRPO): a bounded `Table.queue`
  whose items are whole rollout chunks, `Transition` [T, B] (or windows of W chunks);
  actors block when the learner falls behind. A learner batch of M items becomes
  `Transition` [T, M * B].
What an actor writes and what the learner reads are both derived from one example
pytree (`example_item`), so the two cannot drift apart.
"""

import queue
import threading
import time
from collections.abc import Iterator

import jax
import numpy as np
import reverb
import tensorflow as tf
from absl import logging
from reverb.platform import checkpointers_lib

from distrl import config as config_lib
from distrl import replay_checkpoint
from distrl.agents import Pipeline
from distrl.types import QTransition, Transition, Versioned

TABLE = "experience"


def example_item(config, obs_size: int) -> Versioned:
    """A zero pytree shaped like one Reverb item of this config's pipeline."""
    b, t = config.actor.num_envs, config_lib.item_length(config)
    pipeline = config_lib.pipeline(config)
    obs = np.zeros((b, obs_size), np.float32)
    scalar = lambda dtype=np.float32: np.zeros((b,), dtype)  # noqa: E731
    version = np.zeros((), np.int32)
    if pipeline is Pipeline.REPLAY:
        return Versioned(QTransition(obs, scalar(np.int32), scalar(), scalar(), obs), version)
    extras = {"log_prob": scalar(), "value": scalar()}
    if pipeline is Pipeline.EPISODES:
        extras["owned"] = scalar()  # see distrl.agents.episodes
    step = Transition(
        observation=obs,
        action=scalar(np.int32),
        reward=scalar(),
        discount=scalar(),
        last=scalar(np.bool_),
        next_observation=obs,
        extras=extras,
    )
    return Versioned(jax.tree.map(lambda x: np.zeros((t,) + x.shape, x.dtype), step), version)


def signature(config, obs_size: int):
    """tf.TensorSpec pytree of one item: what actors write and the learner reads."""
    return tf.nest.map_structure(
        lambda x: tf.TensorSpec(x.shape, tf.as_dtype(x.dtype)), example_item(config, obs_size)
    )


def make_tables(config, obs_size: int):
    """The Reverb tables of this config's pipeline (called inside the replay node)."""
    sig = signature(config, obs_size)
    r = config.replay
    if config_lib.pipeline(config) is not Pipeline.REPLAY:
        return [reverb.Table.queue(TABLE, max_size=r.queue_size, signature=sig)]
    if r.sampler == "prioritized":
        sampler = reverb.selectors.Prioritized(r.priority_exponent)
    else:
        sampler = reverb.selectors.Uniform()
    max_items, min_items = config_lib.replay_items(config)  # sizes count transitions
    limiter = reverb.rate_limiters.SampleToInsertRatio(
        samples_per_insert=r.samples_per_insert,
        min_size_to_sample=min_items,
        error_buffer=config_lib.error_buffer(config),
    )
    return [
        reverb.Table(
            TABLE,
            sampler=sampler,
            remover=reverb.selectors.Fifo(),
            max_size=max_items,
            rate_limiter=limiter,
            signature=sig,
        )
    ]


class Writer:
    """Writes rollout output to the table: per time step (replay) or per chunk (queue).

    `write(pipeline, items, version)` picks one of the two for the pipeline:
    `write_steps(items, version)` takes a pytree with a leading [K] dim and makes K
    items; `write_chunk(item, version)` makes one item of the whole pytree. Each item
    is a `Versioned(data, version)`: `version` is the params version the actor acted
    with. New items get `self.priority` (the actor keeps it at the learner's largest
    priority under prioritized replay). Both return once the server has confirmed
    the items, waiting in short slices so that a stop request (`should_stop()`) is
    noticed even while the rate limiter or a full queue blocks.

    Every item is one appended step referenced whole, so the writer calls Reverb's
    C++ writer directly (`_append_item`): the Python `TrajectoryWriter.append` and
    `create_item` (path flattening, column history, `TrajectoryColumn`s) cost more
    than the C++ work for a DQN actor's 16 items per rollout (benchmarks/README.md,
    "Issue 14: the DQN data path").
    """

    def __init__(self, client: reverb.Client, should_stop, flush_timeout_ms: int = 200):
        self._writer = client.trajectory_writer(num_keep_alive_refs=1)
        # The C++ writer behind it (reverb 0.7.2 keeps it as `_writer`): its columns
        # are the flat positions of the first `Append`, i.e. the signature's order.
        self._cpp = self._writer._writer
        self._should_stop = should_stop
        self._timeout_ms = flush_timeout_ms
        self.priority = 1.0
        self.blocked_seconds = 0.0  # time spent waiting on the server, for metrics
        self._created = 0  # items created since the last confirmed flush
        self._written = 0  # items the server confirmed, not yet popped
        self._squeezed = None  # CreateItem's per-column flags: one step each, squeezed

    def pop_written(self) -> int:
        """Items the server confirmed since the last call."""
        written, self._written = self._written, 0
        return written

    def write(self, pipeline: Pipeline, items, version: int = 0) -> None:
        """An actor's items for `pipeline`: REPLAY [T, B] -> T items, else one item."""
        if pipeline is Pipeline.REPLAY:
            self.write_steps(items, version)
        else:
            self.write_chunk(items, version)

    def write_steps(self, items, version: int = 0) -> None:
        """K items from a pytree of numpy arrays [K, ...], one step + item each."""
        leaves = jax.tree.leaves(items)
        stamp = np.int32(version)
        for k in range(leaves[0].shape[0]):
            self._append_item([x[k] for x in leaves] + [stamp])
        self._flush()

    def write_chunk(self, item, version: int = 0) -> None:
        """One item holding the whole pytree (e.g. a [T, B] chunk)."""
        self._append_item(jax.tree.leaves(item) + [np.int32(version)])
        self._flush()

    def _append_item(self, flat: list) -> None:
        """One step (the leaves of `Versioned(data, version)` in tree order, the order
        of the table's signature) and one item referencing all of it."""
        refs = self._cpp.Append(flat)
        if self._squeezed is None:
            self._squeezed = [True] * len(refs)
        self._cpp.CreateItem(TABLE, float(self.priority), [[ref] for ref in refs], self._squeezed)
        self._created += 1

    def _flush(self) -> None:
        start = time.perf_counter()
        try:
            while not self._should_stop():
                try:
                    self._writer.flush(timeout_ms=self._timeout_ms)
                    self._written, self._created = self._written + self._created, 0
                    return
                except reverb.errors.DeadlineExceededError:
                    continue
        finally:
            self.blocked_seconds += time.perf_counter() - start

    def close(self) -> None:
        """Ends the stream; pending items are dropped when the program is stopping."""
        try:
            self._writer.end_episode(clear_buffers=True, timeout_ms=self._timeout_ms)
        except reverb.errors.DeadlineExceededError:
            pass
        self._writer.close()


def in_flight_samples(config) -> int:
    """Samples a dataset worker may request ahead: `learner.max_in_flight`, or derived.

    A queue's sampled chunks leave the table at once, so every in-flight sample is a
    chunk that ages while it waits; 0 derives one batch for the queue. Replay samples
    stay in the table, so there 0 derives max(64, 4 batches) for throughput.
    """
    k = config_lib.items_per_batch(config)
    if config.learner.get("max_in_flight", 0):  # a run saved before the field: derived
        return int(config.learner.max_in_flight)
    if config_lib.pipeline(config) is Pipeline.REPLAY:
        return max(64, 4 * k)
    return k


def make_dataset(server_address: str, config, obs_size: int, timeout_ms: int = 500):
    """A prefetching tf.data pipeline of sampled items (numpy pytrees).

    Replay: `ReplaySample` batches with leading [items_per_batch] (tf.data batches;
    a partial batch lost at a timeout was only sampled, never removed). Queue: single
    items, `learner.prefetch` batches' worth buffered, one worker: `iterate_batches`
    batches them so that no consumed chunk is ever dropped. On a sampling timeout
    (nothing to sample for `timeout_ms`) the iterator ends, so the learner can check
    for a stop request and build a new one.
    """
    sig = signature(config, obs_size)
    is_replay = config_lib.pipeline(config) is Pipeline.REPLAY
    k = config_lib.items_per_batch(config)
    ds = reverb.TrajectoryDataset(
        server_address=server_address,
        table=TABLE,
        dtypes=tf.nest.map_structure(lambda s: s.dtype, sig),
        shapes=tf.nest.map_structure(lambda s: s.shape, sig),
        max_in_flight_samples_per_worker=in_flight_samples(config),
        # One worker: a second one's buffered chunks would be lost when the first
        # times out and the iterator is rebuilt.
        num_workers_per_iterator=-1 if is_replay else 1,
        rate_limiter_timeout_ms=timeout_ms,
    )
    if is_replay:
        ds = ds.batch(k, drop_remainder=True)
        return ds.prefetch(config.learner.prefetch) if config.learner.prefetch else ds
    return ds.prefetch(config.learner.prefetch * k) if config.learner.prefetch else ds


def to_learner_batch(data, pipeline: Pipeline):
    """A sampled batch -> the agent's batch: QTransition [K*B] (REPLAY) or Transition
    [T, M*B] (a batch of M on-policy items of T steps).

    `data` is the sampled `Versioned` batch (its `data` is used) or that data itself.
    """
    if isinstance(data, Versioned):
        data = data.data
    if pipeline is Pipeline.REPLAY:
        return jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:]), data)

    def to_time_major(x):  # [M, T, B, ...] -> [T, M * B, ...]
        x = np.swapaxes(x, 0, 1)
        return x.reshape(x.shape[:1] + (-1,) + x.shape[3:])

    return jax.tree.map(to_time_major, data)


def _stack(samples):
    """K single `ReplaySample`s -> one with a leading [K] dim on every leaf."""
    return jax.tree.map(lambda *xs: np.stack(xs), *samples)


def iterate_batches(
    server_address: str, config, obs_size: int, should_stop, timeout_ms: int = 500
) -> Iterator:
    """Yields (ReplaySample batch [items_per_batch], seconds waited) until `should_stop()`.

    Rebuilds the dataset after each sampling timeout, so waiting for data never
    hides a stop request. Queue items sampled before a timeout are kept and go
    into the next batch: every chunk taken from the queue is learned from (only a
    partial batch pending when the program stops is not).
    """
    batched = config_lib.pipeline(config) is Pipeline.REPLAY
    k = config_lib.items_per_batch(config)
    pending = []  # queue items sampled but not yet yielded; survives rebuilds
    waited = 0.0
    while not should_stop():
        iterator = make_dataset(server_address, config, obs_size, timeout_ms).as_numpy_iterator()
        start = time.perf_counter()
        try:
            for sample in iterator:
                if not batched:
                    pending.append(sample)
                    if len(pending) < k:
                        continue
                    sample, pending = _stack(pending), []
                yield sample, waited + time.perf_counter() - start
                waited = 0.0
                if should_stop():
                    return
                start = time.perf_counter()
        except tf.errors.DeadlineExceededError:
            waited += time.perf_counter() - start
            logging.info("replay: no data for a while; still waiting")


def importance_exponent(config, updates: int) -> float:
    """beta after `updates` updates: linear from `importance_exponent` to 1."""
    r = config.replay
    beta0, anneal = r.get("importance_exponent", 0.4), r.get("importance_anneal_updates", 0)
    if not anneal:
        return float(beta0)
    return float(beta0 + (1.0 - beta0) * min(updates / anneal, 1.0))


def importance_weights(info, beta: float) -> np.ndarray:
    """Prioritized replay's importance-sampling weights [K] of a sampled batch.

    w_i = (N * P(i)) ** -beta, over the batch's largest weight (so weights only
    shrink updates), with P(i) the item's sampling probability and N the table size
    when it was sampled (`SampleInfo.probability`, `SampleInfo.table_size`).
    """
    w = (np.asarray(info.table_size, np.float64) * np.asarray(info.probability)) ** -beta
    return (w / np.max(w)).astype(np.float32)


class PriorityUpdater:
    """Writes new item priorities to the table from a background thread.

    `submit(keys [K], priorities [K * B])` returns at once (the arrays may still be
    on the device; they are fetched in the thread), so the learner's next update
    does not wait for Reverb. An item holds B transitions: its priority is the
    largest of theirs (floored at 1e-6 so that no item becomes unsampleable).
    `max_priority` is the largest item priority written so far (1.0 before the
    first), what new items are inserted at. At most `max_pending` updates wait; beyond
    that `submit` blocks, so a slow server slows the learner instead of growing a
    backlog of stale priorities.
    """

    def __init__(self, client: reverb.Client, max_pending: int = 8):
        self._client = client
        self._queue = queue.Queue(max_pending)
        self._max = None
        self.written = 0  # updates applied, for tests and metrics
        self._thread = threading.Thread(target=self._loop, name="priority-updater", daemon=True)
        self._thread.start()

    @property
    def max_priority(self) -> float:
        return 1.0 if self._max is None else self._max

    def submit(self, keys, priorities) -> None:
        self._queue.put((keys, priorities))

    def _loop(self) -> None:
        while True:
            job = self._queue.get()
            if job is None:
                return
            keys, priorities = jax.device_get(job)
            keys = np.asarray(keys)
            priorities = np.asarray(priorities, np.float64).reshape(len(keys), -1)
            priorities = np.maximum(np.max(priorities, axis=1), 1e-6)  # [K]
            self._max = max(self._max or 0.0, float(np.max(priorities)))
            try:
                self._client.mutate_priorities(
                    TABLE, updates=dict(zip(keys.tolist(), priorities.tolist()))
                )
                self.written += 1
            except Exception as err:  # noqa: BLE001 - a stopping server: nothing to update
                logging.info("replay: priority update failed (%s)", err)

    def close(self, timeout_s: float = 3.0) -> None:
        """Applies what is pending (up to `timeout_s`) and stops the thread."""
        self._queue.put(None)
        self._thread.join(timeout_s)


def wait_for_server(client: reverb.Client, should_stop, max_backoff_s: float = 8.0) -> bool:
    """Blocks until the Reverb server answers (True) or a stop is requested (False).

    Retries with exponential backoff and logs why, so an unreachable server shows up
    in the node's log instead of as a silent hang or crash.
    """
    backoff = 0.25
    while not should_stop():
        try:
            client.server_info(timeout=2)
            return True
        except Exception as err:  # noqa: BLE001 - grpc surfaces several error types
            logging.warning(
                "replay: server %s unreachable (%s); retrying in %.1f s",
                client.server_address,
                type(err).__name__,
                backoff,
            )
            time.sleep(backoff)
            backoff = min(2 * backoff, max_backoff_s)
    return False


def make_checkpointer(
    path: str, fallback: str | None = None
) -> checkpointers_lib.DefaultCheckpointer:
    """Reverb's checkpointer for the replay node, writing under `path` (the run dir).

    Without one, Reverb's server makes a fresh temp dir under /tmp. This one also
    loads, when the server starts, the newest complete checkpoint found in `path`,
    or, when `path` is empty, the checkpoint at `fallback`. distrl empties `path`
    first (`replay_checkpoint.adopt`: the launcher on a resume, the replay node on
    a restart) and passes the checkpoint it chose and verified as `fallback`.
    Reverb writes each checkpoint to its own directory and marks it DONE when
    complete.
    """
    return checkpointers_lib.DefaultCheckpointer(path, fallback_checkpoint_path=fallback)


def checkpoint(
    client: reverb.Client,
    timeout_s: float = 10.0,
    keep_in: str | None = None,
    keep: int = 3,
    learner_checkpoint: str | None = None,
) -> str | None:
    """Asks the server to checkpoint its tables; the path, or None (logged) on failure.

    `Client.checkpoint` has no deadline, so it runs in a helper thread: a server
    that is already shutting down must not hang the learner's final checkpoint.
    With `keep_in` (a run directory) the checkpoint joins the run's newest `keep`,
    sealed with `learner_checkpoint`, its round (`distrl.replay_checkpoint.keep`).
    """
    outcome = {}

    def call():
        try:
            outcome["path"] = client.checkpoint()
        except Exception as err:  # noqa: BLE001 - grpc surfaces several error types
            outcome["error"] = err

    thread = threading.Thread(target=call, name="reverb-checkpoint", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if "path" not in outcome:
        logging.warning("replay: checkpoint failed (%s)", outcome.get("error", "timed out"))
    elif keep_in is not None:
        try:
            replay_checkpoint.keep(outcome["path"], keep_in, keep, learner_checkpoint)
        except OSError as err:
            logging.warning("replay: keeping checkpoint %s failed: %s", outcome["path"], err)
    return outcome.get("path")


def table_stats(client: reverb.Client, timeout_s: int = 2) -> dict[str, float]:
    """Cumulative numbers of the experience table, from `server_info`.

    size / max_size (items), inserts and samples completed (items, since the
    table's creation, including a restored checkpoint's), and the table worker's
    milliseconds spent with inserts held back until samples catch up
    (`waiting_for_sampling_ms`: the rate limiter or a full queue blocking actors)
    and with samples held back until inserts arrive (`waiting_for_inserts_ms`).
    """
    info = client.server_info(timeout=timeout_s)[TABLE]
    limiter, worker = info.rate_limiter_info, info.table_worker_time
    return dict(
        size=float(info.current_size),
        max_size=float(info.max_size),
        inserts=float(limiter.insert_stats.completed),
        samples=float(limiter.sample_stats.completed),
        waiting_for_sampling_ms=float(worker.waiting_for_sampling_ms),
        waiting_for_inserts_ms=float(worker.waiting_for_inserts_ms),
    )
