"""Stage 5 of the data flow: Reverb tables, signatures, writers and datasets.

The one module that knows Reverb's API. The pipelines (`agents.Pipeline`) share it:
- REPLAY (DQN): a table of items that each hold the k x B (n-step) transitions of k
  consecutive time steps of one actor's B envs, `QTransition` [k, B] (k =
  `replay.item_steps`; [B] when k is 1, the layout of runs saved before the field);
  uniform or prioritized sampling, FIFO removal and a `SampleToInsertRatio` rate
  limiter. A learner batch of N transitions is N / (k x B) items.
- CHUNKS and EPISODES (A2C, V-trace, PPO; REINFORCE, GRPO): a bounded `Table.queue`
  whose items are whole rollout chunks, `Transition` [T, B] (or windows of W chunks);
  actors block when the learner falls behind. A learner batch of M items becomes
  `Transition` [T, M * B].
What an actor writes and what the learner reads are both derived from one example
pytree (`example_item`), so the two cannot drift apart.
"""

import functools
import operator
import queue
import socket
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
    version = np.zeros((), np.int32)
    if pipeline is Pipeline.REPLAY:
        lead = replay_item_shape(config)
        obs = np.zeros(lead + (obs_size,), np.float32)
        action, scalar = np.zeros(lead, np.int32), np.zeros(lead, np.float32)
        return Versioned(QTransition(obs, action, scalar, scalar, obs), version)
    obs = np.zeros((b, obs_size), np.float32)
    scalar = lambda dtype=np.float32: np.zeros((b,), dtype)  # noqa: E731
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


def replay_item_shape(config) -> tuple:
    """The leading dims of a DQN item's fields: (k, B), or (B,) when k is 1 (the
    layout before `replay.item_steps`, so older runs' replay checkpoints still fit)."""
    k, b = config_lib.item_steps(config), config.actor.num_envs
    return (k, b) if k > 1 else (b,)


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


# gRPC target schemes: an address that names one already has its only form.
_SCHEMES = ("dns:", "ipv4:", "ipv6:", "unix:", "unix-abstract:", "vsock:")
_PROBE_TIMEOUT_S = 1  # server_info's deadline (whole seconds) when checking a connection


def target_forms(address: str) -> tuple[str, ...]:
    """The equivalent gRPC targets of a server address: ("host:port", "dns:host:port").

    gRPC shares one connection (subchannel), and its reconnect backoff, between
    every channel of a process with the same canonical target: after an outage a
    new client on the old target waits for the old connection's next attempt
    (1, 1.6, 2.6, 4.1, 6.6 s apart, measured as 7-9 s after a server was back).
    "dns:host:port" names the same server but is another target, so a client on
    it connects at once. A reconnect alternates between the two forms.
    """
    if address.startswith(_SCHEMES):
        return (address,)
    return (address, f"dns:{address}")


def _sleep(seconds: float, should_stop) -> None:
    """Sleeps up to `seconds`, in 0.1 s slices, returning early on a stop request."""
    end = time.monotonic() + seconds
    while not should_stop() and time.monotonic() < end:
        time.sleep(min(0.1, max(0.0, end - time.monotonic())))


def answers(client: reverb.Client) -> bool:
    """Whether the server answers `client` within a second (its connection is up)."""
    try:
        client.server_info(timeout=_PROBE_TIMEOUT_S)
        return True
    except Exception:  # noqa: BLE001 - grpc surfaces several error types
        return False


class Connection:
    """A node's way to the replay server: its client, replaced after an outage.

    `reconnect()` drops the client (its connection is the stale one), switches to
    the address's other target form (`target_forms`) and returns once a new
    client there answers, or None when a stop came first. Each try first checks
    that the server's port accepts a TCP connection (refused at once while the
    server is down), then asks a brand-new client (a failed client's connection
    would back off); tries are 0.05 s apart, doubling to 0.5 s. `reconnects`
    counts them; each is one log line.
    """

    def __init__(self, client: reverb.Client, should_stop, name: str):
        self.client = client
        self._forms = target_forms(client.server_address)
        self._form = 0
        self._should_stop = should_stop
        self._name = name
        self.reconnects = 0

    @property
    def address(self) -> str:
        """The target in use (the original address or its other form)."""
        return self._forms[self._form]

    def reconnect(self, why: str) -> reverb.Client | None:
        start = time.monotonic()
        self.client = None
        self._form = (self._form + 1) % len(self._forms)
        backoff, tries = 0.05, 0
        while not self._should_stop():
            tries += 1
            client = _listening(self._forms[0]) and reverb.Client(self.address)
            if client and answers(client):
                self.client = client
                self.reconnects += 1
                logging.warning(
                    "replay: %s reconnected to %s in %.1f s (%d tries) after %s; reconnect %d",
                    self._name,
                    self.address,
                    time.monotonic() - start,
                    tries,
                    why,
                    self.reconnects,
                )
                return client
            del client  # before the next try: its connection is backing off
            _sleep(backoff, self._should_stop)
            backoff = min(2 * backoff, 0.5)
        return None


def _listening(address: str, timeout_s: float = 0.5) -> bool:
    """Whether something accepts TCP connections at "host:port" (True when the address
    is not one: then the client's answer decides)."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        return True
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
        return True
    except OSError:
        return False


class Writer:
    """Writes rollout output to the table: per k time steps (replay) or per chunk (queue).

    `write(pipeline, items, version)` picks one of the two for the pipeline:
    `write_steps(items, version)` takes a pytree with a leading [K] dim and makes K
    items; `write_chunk(item, version)` makes one item of the whole pytree. Each item
    is a `Versioned(data, version)`: `version` is the params version the actor acted
    with. New items get `self.priority` (the actor keeps it at the learner's largest
    priority under prioritized replay). Both return once the server has confirmed
    the items, waiting in short slices so that a stop request (`should_stop()`) is
    noticed even while the rate limiter or a full queue blocks.

    The writer owns `client` (hand it over: another client to the same server in
    the process would share its connection's reconnect backoff). When a flush has
    waited `check_after_s` and the server does not answer the writer's client
    (`answers`: a rate limiter or full queue answers at once, a lost server or a
    connection still backing off after it came back does not), the server went
    away: the writer closes its Reverb writer, reconnects (`Connection`) and
    writes the items not yet confirmed again on the new one. Items are whole
    steps (an n-step item carries its own sums; the n-step tail lives in the
    actor), so items lost with the server never corrupt later ones, and items
    that the old server took before dying may be written twice. `reconnects`
    counts the reconnects.

    Every item is one appended step referenced whole, so the writer calls Reverb's
    C++ writer directly (`_append_item`): the Python `TrajectoryWriter.append` and
    `create_item` (path flattening, column history, `TrajectoryColumn`s) cost more
    than the C++ work for a DQN actor's 16 items per rollout at k = 1
    (benchmarks/README.md, "Issue 14: the DQN data path").
    """

    def __init__(
        self,
        client: reverb.Client,
        should_stop,
        flush_timeout_ms: int = 200,
        check_after_s: float = 1.0,
        name: str = "writer",
    ):
        self._connection = Connection(client, should_stop, name)
        self._should_stop = should_stop
        self._timeout_ms = flush_timeout_ms
        self._check_after_s = check_after_s
        self.priority = 1.0
        self.blocked_seconds = 0.0  # time spent waiting on the server, for metrics
        self._unconfirmed = []  # flat items created since the last confirmed flush
        self._written = 0  # items the server confirmed, not yet popped
        self._squeezed = None  # CreateItem's per-column flags: one step each, squeezed
        self._open(client)

    @property
    def reconnects(self) -> int:
        return self._connection.reconnects

    def _open(self, client: reverb.Client) -> None:
        self._writer = client.trajectory_writer(num_keep_alive_refs=1)
        # The C++ writer behind it (reverb 0.7.2 keeps it as `_writer`): its columns
        # are the flat positions of the first `Append`, i.e. the signature's order.
        self._cpp = self._writer._writer

    def pop_written(self) -> int:
        """Items the server confirmed since the last call."""
        written, self._written = self._written, 0
        return written

    def write(self, pipeline: Pipeline, items, version: int = 0) -> None:
        """An actor's items for `pipeline`: REPLAY [T/k, k, B] (or [T, B] at k = 1) ->
        T/k items, else one item."""
        if pipeline is Pipeline.REPLAY:
            self.write_steps(items, version)
        else:
            self.write_chunk(items, version)

    def write_steps(self, items, version: int = 0) -> None:
        """K items from a pytree of numpy arrays [K, ...], one step + item each (a DQN
        item of k time steps is one [k, B] row: `make_item_fn` shapes the rows)."""
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
        self._create(flat)
        self._unconfirmed.append(flat)

    def _create(self, flat: list) -> None:
        refs = self._cpp.Append(flat)
        if self._squeezed is None:
            self._squeezed = [True] * len(refs)
        self._cpp.CreateItem(TABLE, float(self.priority), [[ref] for ref in refs], self._squeezed)

    def _flush(self) -> None:
        start = time.perf_counter()
        checked = time.monotonic()
        try:
            while not self._should_stop():
                try:
                    self._writer.flush(timeout_ms=self._timeout_ms)
                    self._written += len(self._unconfirmed)
                    self._unconfirmed = []
                    return
                except reverb.errors.DeadlineExceededError:
                    if time.monotonic() - checked < self._check_after_s:
                        continue
                    if not answers(self._connection.client) and not self._reopen():
                        return  # stopped while reconnecting
                    checked = time.monotonic()
        finally:
            self.blocked_seconds += time.perf_counter() - start

    def _reopen(self) -> bool:
        """A new client and writer after the server went away; the unconfirmed items
        written again. False when the program stopped first."""
        self._writer.close()  # cancels its stream; what it still held is dropped
        self._writer = self._cpp = None
        waited = time.perf_counter()
        client = self._connection.reconnect(
            f"a flush waited {self._check_after_s:.0f} s and the server did not answer"
        )
        if client is None:
            return False
        self._open(client)
        for flat in self._unconfirmed:
            self._create(flat)
        logging.info(
            "replay: %d unconfirmed items written again (%.1f s without a server)",
            len(self._unconfirmed),
            time.perf_counter() - waited,
        )
        return True

    def close(self) -> None:
        """Ends the stream; pending items are dropped when the program is stopping."""
        if self._writer is None:  # stopped while reconnecting
            return
        try:
            self._writer.end_episode(clear_buffers=True, timeout_ms=self._timeout_ms)
        except reverb.errors.DeadlineExceededError:
            pass
        self._writer.close()


def in_flight_samples(config) -> int:
    """Samples a dataset worker may request ahead: `learner.max_in_flight`, or derived.

    A queue's sampled chunks leave the table at once, so every in-flight sample is a
    chunk that ages while it waits; 0 derives one batch for the queue. Replay samples
    stay in the table, so there 0 derives max(64 items of one time step, 4 batches)
    for throughput: the same transitions at any `replay.item_steps` k (64 / k items),
    since samples taken that far ahead add their wait to the data age (64 items of k
    = 4 steps were 64 batches ahead: data age +17% on slippery 8x8).
    """
    k = config_lib.items_per_batch(config)
    if config.learner.get("max_in_flight", 0):  # a run saved before the field: derived
        return int(config.learner.max_in_flight)
    if config_lib.pipeline(config) is Pipeline.REPLAY:
        return max(-(-64 // config_lib.item_steps(config)), 4 * k)
    return k


def make_dataset(server_address: str, config, obs_size: int, timeout_ms: int = 500):
    """A prefetching tf.data pipeline of sampled items (numpy pytrees).

    Replay: `ReplaySample` reads of `batches_per_read` batches, leading
    [batches_per_read x items_per_batch] (tf.data batches; a partial read lost at a
    timeout was only sampled, never removed), `learner.prefetch` batches ahead in
    all. Queue: single
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
        per_read = batches_per_read(config)
        ds = ds.batch(k * per_read, drop_remainder=True)
        # the read being cut already holds per_read - 1 batches ahead of the update
        ahead = max(0, -(-(config.learner.prefetch - per_read + 1) // per_read))
        return ds.prefetch(ahead) if ahead else ds
    return ds.prefetch(config.learner.prefetch * k) if config.learner.prefetch else ds


def batches_per_read(config) -> int:
    """Batches per dataset read: `learner.batches_per_read` for replay, 1 for a queue
    (its items are batched one by one, so no chunk waits in a read)."""
    if config_lib.pipeline(config) is not Pipeline.REPLAY:
        return 1
    return int(config.learner.get("batches_per_read", 1))


def _cut(read, n: int):
    """A read of n batches -> n batches (views: nothing is copied)."""
    size = len(read.info.key) // n
    views = (operator.itemgetter(slice(i * size, (i + 1) * size)) for i in range(n))
    return [jax.tree.map(view, read) for view in views]


def to_learner_batch(data, pipeline: Pipeline):
    """A sampled batch -> the agent's batch: QTransition [K*k*B] (REPLAY: K items of
    [k, B], or of [B] at k = 1) or Transition [T, M*B] (a batch of M on-policy items
    of T steps).

    `data` is the sampled `Versioned` batch (its `data` is used) or that data itself.
    """
    if isinstance(data, Versioned):
        data = data.data
    if pipeline is Pipeline.REPLAY:
        lead = np.ndim(data.action)  # [K, k, B] or [K, B]: the dims that become N
        return jax.tree.map(lambda x: x.reshape((-1,) + x.shape[lead:]), data)

    def to_time_major(x):  # [M, T, B, ...] -> [T, M * B, ...]
        x = np.swapaxes(x, 0, 1)
        return x.reshape(x.shape[:1] + (-1,) + x.shape[3:])

    return jax.tree.map(to_time_major, data)


def _stack(samples):
    """K single `ReplaySample`s -> one with a leading [K] dim on every leaf."""
    return jax.tree.map(lambda *xs: np.stack(xs), *samples)


_ENDED = object()  # what `_Pull.get` returns when the dataset's iterator ended


class _Pull:
    """A dataset iterator whose `next()` runs in a thread of its own, one call at a time.

    A lost server blocks `next()` in native code (Reverb's sampler retries until gRPC
    reconnects, 7-9 s after the server is back), so the caller waits for a call with
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
    config,
    obs_size: int,
    should_stop,
    timeout_ms: int = 500,
    stall_s: float = 2.0,
    wait_s: float = 0.2,
) -> Iterator:
    """Yields (ReplaySample batch [items_per_batch], seconds waited) until `should_stop()`.

    Replay reads come `batches_per_read` batches at a time and are yielded one batch
    after another (`should_stop` is checked between them).

    Rebuilds the dataset after each sampling timeout, so waiting for data never
    hides a stop request. Queue items sampled before a timeout are kept and go
    into the next batch: every chunk taken from the queue is learned from (only a
    partial batch pending when the program stops is not).

    The dataset is read through `_Pull`, in slices of `wait_s`. A healthy server
    answers every request within `timeout_ms` (a sample or a sampling timeout);
    when nothing came for `stall_s` and the server does not answer a client on
    the dataset's target (`answers`), the server went away: the dataset is given
    up and made anew on the other target form once the server answers
    (`Connection.reconnect`). A queue's chunks that the given-up dataset had read
    ahead from the restarted server (up to a batch) are then not learned from.
    """
    batched = config_lib.pipeline(config) is Pipeline.REPLAY
    k = config_lib.items_per_batch(config)
    per_read = batches_per_read(config)
    connection = Connection(reverb.Client(server_address), should_stop, "the learner's dataset")
    pending = []  # queue items sampled but not yet yielded; survives rebuilds
    waited, pull, heard = 0.0, None, time.monotonic()
    try:
        while not should_stop():
            if pull is None:
                address = connection.address
                make = functools.partial(_iterator, address, config, obs_size, timeout_ms)
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
                    if not answers(connection.client):
                        pull.close()
                        pull = None
                        if connection.reconnect(f"no sample for {stall_s:.0f} s") is None:
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


def _iterator(address: str, config, obs_size: int, timeout_ms: int):
    return make_dataset(address, config, obs_size, timeout_ms).as_numpy_iterator()


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


def transition_weights(config, info, beta: float) -> np.ndarray:
    """The importance weights of a sampled batch per transition, [K * k * B]: each
    item's weight (`importance_weights`) for each of its k x B transitions, which
    `to_learner_batch` keeps consecutive."""
    return np.repeat(importance_weights(info, beta), config_lib.item_transitions(config))


class PriorityUpdater:
    """Writes new item priorities to the table from a background thread.

    `submit(keys [K], priorities [K * k * B])` returns at once (the arrays may still
    be on the device; they are fetched in the thread), so the learner's next update
    does not wait for Reverb. An item holds k x B transitions, consecutive in the
    batch (`to_learner_batch`): its priority is the largest of theirs (floored at
    1e-6 so that no item becomes unsampleable). `max_priority` is the largest item
    priority written so far (1.0 before the first), what new items are inserted
    at. At most `max_pending` updates wait; beyond that `submit` blocks, so a slow
    server slows the learner instead of growing a backlog of stale priorities.
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
