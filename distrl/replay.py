"""Stage 5 of the data flow: Reverb tables, signatures, writers and datasets.

The one module that knows Reverb's API. Two pipelines share it:
- replay (DQN): a table of items that each hold the B (n-step) transitions of one
  time step, `QTransition` [B]; uniform or prioritized sampling, FIFO removal and a
  `SampleToInsertRatio` rate limiter. A learner batch of N transitions is N / B items.
- queue (A2C, V-trace, PPO): a bounded `Table.queue` whose items are whole rollout
  chunks, `Transition` [T, B]; actors block when the learner falls behind. A
  learner batch of M chunks becomes `Transition` [T, M * B].
What an actor writes and what the learner reads are both derived from one example
pytree (`example_item`), so the two cannot drift apart.
"""

import threading
import time
from typing import Dict, Iterator, Optional

import jax
import numpy as np
import reverb
import tensorflow as tf
from absl import logging
from reverb.platform import checkpointers_lib

from distrl import config as config_lib
from distrl import replay_checkpoint
from distrl.types import QTransition, Transition

TABLE = "experience"


def example_item(config, obs_size: int):
    """A zero pytree shaped like one Reverb item of this config's pipeline."""
    b, t = config.actor.num_envs, config.actor.unroll_length
    agent_config = config_lib.make_agent_config(config)
    obs = np.zeros((b, obs_size), np.float32)
    scalar = lambda dtype=np.float32: np.zeros((b,), dtype)  # noqa: E731
    if config_lib.is_replay(agent_config):
        return QTransition(obs, scalar(np.int32), scalar(), scalar(), obs)
    step = Transition(
        observation=obs, action=scalar(np.int32), reward=scalar(), discount=scalar(),
        last=scalar(np.bool_), next_observation=obs,
        extras={"log_prob": scalar(), "value": scalar()},
    )
    return jax.tree.map(lambda x: np.zeros((t,) + x.shape, x.dtype), step)


def signature(config, obs_size: int):
    """tf.TensorSpec pytree of one item: what actors write and the learner reads."""
    return tf.nest.map_structure(
        lambda x: tf.TensorSpec(x.shape, tf.as_dtype(x.dtype)), example_item(config, obs_size)
    )


def make_tables(config, obs_size: int):
    """The Reverb tables of this config's pipeline (called inside the replay node)."""
    sig = signature(config, obs_size)
    r = config.replay
    if not config_lib.is_replay(config_lib.make_agent_config(config)):
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
            TABLE, sampler=sampler, remover=reverb.selectors.Fifo(), max_size=max_items,
            rate_limiter=limiter, signature=sig,
        )
    ]


class Writer:
    """Writes rollout output to the table: per time step (replay) or per chunk (queue).

    `write_steps(items)` takes a pytree with a leading [K] dim and makes K items;
    `write_chunk(item)` makes one item of the whole pytree. Both return once the
    server has confirmed the items, waiting in short slices so that a stop request
    (`should_stop()`) is noticed even while the rate limiter or a full queue blocks.
    """

    def __init__(self, client: reverb.Client, should_stop, flush_timeout_ms: int = 200):
        self._writer = client.trajectory_writer(num_keep_alive_refs=1)
        self._should_stop = should_stop
        self._timeout_ms = flush_timeout_ms
        self.blocked_seconds = 0.0  # time spent waiting on the server, for metrics

    def write_steps(self, items) -> None:
        """K items from a pytree of numpy arrays [K, ...], one append + item each."""
        leaves, treedef = jax.tree.flatten(items)
        for k in range(leaves[0].shape[0]):
            self._writer.append(jax.tree.unflatten(treedef, [x[k] for x in leaves]))
            self._create_item()
        self._flush()

    def write_chunk(self, item) -> None:
        """One item holding the whole pytree (e.g. a [T, B] chunk)."""
        self._writer.append(item)
        self._create_item()
        self._flush()

    def _create_item(self) -> None:
        step = jax.tree.map(lambda column: column[-1], self._writer.history)
        self._writer.create_item(TABLE, priority=1.0, trajectory=step)

    def _flush(self) -> None:
        start = time.perf_counter()
        try:
            while not self._should_stop():
                try:
                    self._writer.flush(timeout_ms=self._timeout_ms)
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


def make_dataset(server_address: str, config, obs_size: int, timeout_ms: int = 500):
    """A prefetching tf.data pipeline of learner batches (numpy pytrees).

    Yields the sampled `ReplaySample` batches with leading [items_per_batch]. On a
    sampling timeout (nothing to sample for `timeout_ms`) the iterator ends, so the
    learner can check for a stop request and build a new one.
    """
    ds = reverb.TrajectoryDataset(
        server_address=server_address,
        table=TABLE,
        dtypes=tf.nest.map_structure(lambda s: s.dtype, signature(config, obs_size)),
        shapes=tf.nest.map_structure(lambda s: s.shape, signature(config, obs_size)),
        max_in_flight_samples_per_worker=max(64, 4 * config_lib.items_per_batch(config)),
        rate_limiter_timeout_ms=timeout_ms,
    )
    ds = ds.batch(config_lib.items_per_batch(config), drop_remainder=True)
    return ds.prefetch(config.learner.prefetch)


def to_learner_batch(data, replay: bool):
    """A sampled batch -> the agent's batch: QTransition [K*B] or Transition [T, M*B]."""
    if replay:
        return jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:]), data)

    def to_time_major(x):  # [M, T, B, ...] -> [T, M * B, ...]
        x = np.swapaxes(x, 0, 1)
        return x.reshape(x.shape[:1] + (-1,) + x.shape[3:])

    return jax.tree.map(to_time_major, data)


def iterate_batches(server_address: str, config, obs_size: int, should_stop) -> Iterator:
    """Yields (ReplaySample batch, seconds waited) until `should_stop()`.

    Rebuilds the dataset after each sampling timeout, so waiting for data never
    hides a stop request.
    """
    while not should_stop():
        iterator = make_dataset(server_address, config, obs_size).as_numpy_iterator()
        start = time.perf_counter()
        try:
            for sample in iterator:
                yield sample, time.perf_counter() - start
                if should_stop():
                    return
                start = time.perf_counter()
        except tf.errors.DeadlineExceededError:
            logging.info("replay: no data for a while; still waiting")


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
                client.server_address, type(err).__name__, backoff,
            )
            time.sleep(backoff)
            backoff = min(2 * backoff, max_backoff_s)
    return False


def make_checkpointer(path: str, fallback: Optional[str] = None
                      ) -> checkpointers_lib.DefaultCheckpointer:
    """Reverb's checkpointer for the replay node, writing under `path` (the run dir).

    Without one, Reverb's server makes a fresh temp dir under /tmp. This one also
    loads the newest complete checkpoint found in `path` when the server starts
    (a replay node restarted during a run), or, when `path` is empty, the checkpoint
    at `fallback` (a resumed run's, chosen and verified by the launcher:
    `distrl.replay_checkpoint`). Reverb writes each checkpoint to its own directory
    and marks it DONE when complete.
    """
    return checkpointers_lib.DefaultCheckpointer(path, fallback_checkpoint_path=fallback)


def checkpoint(client: reverb.Client, timeout_s: float = 10.0,
               keep_in: Optional[str] = None, keep: int = 3) -> Optional[str]:
    """Asks the server to checkpoint its tables; the path, or None (logged) on failure.

    `Client.checkpoint` has no deadline, so it runs in a helper thread: a server
    that is already shutting down must not hang the learner's final checkpoint.
    With `keep_in` (a run directory) the checkpoint joins the run's newest `keep`
    (`distrl.replay_checkpoint.keep`).
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
            replay_checkpoint.keep(outcome["path"], keep_in, keep)
        except OSError as err:
            logging.warning("replay: keeping checkpoint %s failed: %s", outcome["path"], err)
    return outcome.get("path")


def table_stats(client: reverb.Client, timeout_s: int = 2) -> Dict[str, float]:
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
