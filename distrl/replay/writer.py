"""An actor's items into the replay table or queue (`Writer`)."""

import time

import jax
import numpy as np
import reverb
from absl import logging

from distrl.replay import TABLE
from distrl.replay.connection import Connection, answers


class Writer:
    """Writes rollout output to the table: per k time steps (replay) or per chunk (queue).

    `write_steps(items, version)` takes a pytree with a leading [K] dim and makes K
    items; `write_chunk(item, version)` makes one item of the whole pytree (the
    pipeline picks one: `distrl.pipelines`). Each item
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
    than the C++ work for a DQN actor's many small items (docs/decisions.md, "No queue
    chunk is dropped").
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
        """Ends the stream: the items written so far get one more flush (up to the
        flush timeout, 200 ms: a stopping actor, e.g. one removed from a running
        program, hands over what it wrote while the server is up), then what is still
        unconfirmed is dropped (each item is whole or absent in the table)."""
        if self._writer is None:  # stopped while reconnecting
            return
        try:
            self._writer.flush(timeout_ms=self._timeout_ms)
            self._written += len(self._unconfirmed)
            self._unconfirmed = []
        except Exception:  # noqa: BLE001 - a timeout, or a server that is gone
            pass
        try:
            self._writer.end_episode(clear_buffers=True, timeout_ms=self._timeout_ms)
        except reverb.errors.DeadlineExceededError:
            pass
        self._writer.close()
