"""A node's way to the replay server: the client, its reconnect after an outage, and
the checks that tell a lost server from a busy one."""

import concurrent.futures
import queue
import socket
import threading
import time

import reverb
from absl import logging

from distrl.replay import TABLE

# gRPC target schemes: an address that names one already has its only form.
_SCHEMES = ("dns:", "ipv4:", "ipv6:", "unix:", "unix-abstract:", "vsock:")
_PROBE_TIMEOUT_S = 1  # server_info's deadline (whole seconds) when checking a connection


def target_forms(address: str) -> tuple[str, ...]:
    """The equivalent gRPC targets of a server address: ("host:port", "dns:host:port").

    gRPC shares one connection (subchannel), and its reconnect backoff, between
    every channel of a process with the same canonical target: after an outage a
    new client on the old target waits for the old connection's next attempt (gRPC's
    backoff: 1 s, then 1.6x longer each time, so seconds after a server is back).
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


def answers(client: reverb.Client | None, timeout_s: int = _PROBE_TIMEOUT_S) -> bool:
    """Whether the server answers `client` within `timeout_s` (its connection is up);
    False for None (a connection's client while it reconnects)."""
    if client is None:
        return False
    try:
        client.server_info(timeout=timeout_s)
        return True
    except Exception:  # noqa: BLE001 - grpc surfaces several error types
        return False


class Connection:
    """A node's way to the replay server: its client, replaced after an outage.

    `reconnect()` drops the client (its connection is the stale one), switches to
    the address's other target form (`target_forms`) and returns once a new
    client there answers, or None when a stop came first (or `within_s` passed).
    Each try first checks that the server's port accepts a TCP connection
    (refused at once while the server is down), then asks a brand-new client (a
    failed client's connection would back off); tries are 0.05 s apart, doubling
    to 0.5 s. `reconnects` counts them; each is one log line.

    One connection may serve several threads (the learner's dataset, priority
    updates and checkpoints): `call(use, what)` runs `use(client)` and, when it
    raises and the server does not answer that client, renews the connection
    (`renew`) and tries once more; `renew(stale)` reconnects at most once per
    stale client, so the threads that find the server gone together share one
    reconnect, and a thread that comes after it takes the new client.
    """

    def __init__(self, client: reverb.Client, should_stop, name: str):
        self.client = client
        self._forms = target_forms(client.server_address)
        self._form = 0
        self._should_stop = should_stop
        self._name = name
        self._renewing = threading.Lock()
        self._worker = None  # _Worker: runs the calls given a patience
        self.reconnects = 0

    @property
    def address(self) -> str:
        """The target in use (the original address or its other form)."""
        return self._forms[self._form]

    def call(self, use, what: str, within_s: float | None = None, patience_s: float | None = None):
        """`use(client)`'s result. When it raises and the server does not answer the
        client it used (a restarted replay; a busy server answers), the connection is
        renewed and `use` tried once more on the new client; what that raises, or the
        first error when no new client came within `within_s` (or before a stop), is
        the caller's.

        With `patience_s`, `use` runs in a worker thread, and a call that has not
        returned after `patience_s` while the server does not answer counts as failed
        (Reverb's `mutate_priorities` does not fail on a lost connection: it waits,
        without a deadline, for gRPC's reconnect); the stuck call is left to end on
        its own.
        """
        client = self.client
        try:
            if client is None:  # another thread is reconnecting
                raise ConnectionError("no client: an earlier reconnect gave up")
            return self._run(use, client, patience_s)
        except Exception as err:  # noqa: BLE001 - grpc surfaces several error types
            if answers(client):
                raise
            why = f"{what} failed ({str(err).splitlines()[0] if str(err) else type(err).__name__})"
            fresh = self.renew(client, why, within_s)
            if fresh is None:
                raise
        return self._run(use, fresh, patience_s)

    def _run(self, use, client: reverb.Client, patience_s: float | None):
        if patience_s is None:
            return use(client)
        worker = self._worker = self._worker or _Worker()
        future = worker.submit(use, client)
        while True:
            try:
                return future.result(timeout=patience_s)
            except concurrent.futures.TimeoutError:
                if not answers(client):
                    self._worker = None  # left to its stuck call; the next call gets another
                    raise TimeoutError(f"no answer in {patience_s:g} s") from None

    def lost(self, client: reverb.Client | None) -> bool:
        """Whether the server went away for `client`, which has had nothing from it for
        a while: nothing takes connections at its port (known at once), or it does not
        answer within a second. A starved server may be taken for lost (a reconnect
        that was not needed); a longer probe let a replay restarted within it (a
        zygote's fork is back in about a second) answer, and the old dataset's dead
        stream then waited for gRPC's reconnect."""
        return not _listening(self._forms[0]) or not answers(client)

    def renew(
        self, stale: reverb.Client | None, why: str, within_s: float | None = None
    ) -> reverb.Client | None:
        """A client other than `stale`: the one another thread's reconnect made, or a
        reconnect's here; None after a stop or `within_s` seconds without one."""
        start = time.monotonic()
        if not self._renewing.acquire(timeout=-1 if within_s is None else within_s):
            return None
        try:
            if self.client is not None and self.client is not stale:
                return self.client
            left = None if within_s is None else max(0.0, within_s - (time.monotonic() - start))
            return self.reconnect(why, left)
        finally:
            self._renewing.release()

    def reconnect(self, why: str, within_s: float | None = None) -> reverb.Client | None:
        start = time.monotonic()
        if self.client is not None:  # else an earlier reconnect gave up on this form
            self._form = (self._form + 1) % len(self._forms)
        self.client = None
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
            if within_s is not None and time.monotonic() - start + backoff > within_s:
                logging.warning("replay: %s found no server within %.1f s", self._name, within_s)
                return None
            _sleep(backoff, self._should_stop)
            backoff = min(2 * backoff, 0.5)
        return None


class _Worker:
    """A daemon thread that runs calls one at a time (`submit` -> a Future). Daemon, so
    that a call stuck on a lost server never holds up its process's exit."""

    def __init__(self):
        self._jobs = queue.SimpleQueue()
        threading.Thread(target=self._loop, name="replay-call", daemon=True).start()

    def submit(self, fn, arg) -> concurrent.futures.Future:
        future = concurrent.futures.Future()
        self._jobs.put((future, fn, arg))
        return future

    def _loop(self) -> None:
        while True:
            future, fn, arg = self._jobs.get()
            try:
                future.set_result(fn(arg))
            except BaseException as err:  # noqa: BLE001 - handed to the caller
                future.set_exception(err)


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
