"""The watch of a Ray launch's nodes: one `NodeHost.watch` call per node in flight.

A node's `lp.stop()` touches its host's stop file (`lifecycle.stop_via_file`), which the
host watches locally; each call returns when its node exits or asks to stop, or after
`WATCH_S`, and is then renewed. A call that fails, or has not come back `_LATE_S` after
that, makes its host unreachable: lost on Ray's verdict (`verdict.NodeTable`), else
called again after `_RETRY_S`, and a host that answers again goes on where it was
(nothing restarted, nothing moved). What follows an exit or a loss is the launcher's
(`on_exit`, `on_lost`).
"""

import time

import ray

from distrl.program import nodeproc
from distrl.program.ray.nodes import Node
from distrl.program.ray.verdict import UNREACHABLE_GRACE_S, NodeTable

# A host runs one call at a time, so a stop waits for its node's current watch call:
# this bounds that wait (and costs one small RPC per node per second).
WATCH_S = 1.0
# A watch call that has not come back this long after its WATCH_S counts as unanswered
# (its host unreachable); a new call is sent, which also makes a connection left
# half-open by a network pause fail at once instead of hanging.
_LATE_S = 5.0
# How long after an unreachable host's last failed call the next one is made.
_RETRY_S = 1.0


def _answer(ref) -> tuple:
    """(exit code or None, whether the node asked to stop, the error or None) of a
    finished `watch` call."""
    try:
        code, asked = ray.get(ref)
        return code, asked, None
    except ray.exceptions.RayError as err:
        return None, False, err


class Watch:
    """The watch calls in flight and the unreachable hosts waiting for their next one.

    `on_exit(node, cause)` is told of a node that exited non-zero, `on_lost(node, why)`
    of one whose host is lost; each returns False when that ends the program.
    """

    def __init__(self, table: NodeTable, say, on_exit, on_lost):
        self._table = table
        self._say = say
        self._on_exit = on_exit
        self._on_lost = on_lost
        self._pending = {}  # ObjectRef -> (node, when the call was made)
        self._retry = {}  # node name -> (node, when to call its unreachable host again)

    @property
    def busy(self) -> bool:
        """Whether a node is still watched (a call in flight, or one to make again)."""
        return bool(self._pending or self._retry)

    def renew(self, n: Node) -> None:
        """A new watch call to `n`'s host."""
        self._pending[n.host.watch.remote(WATCH_S)] = (n, time.monotonic())

    def forget(self, n: Node) -> None:
        """`n` is no longer watched (its call's answer is ignored), until `renew`."""
        self._pending = {r: v for r, v in self._pending.items() if v[0] is not n}
        self._retry.pop(n.name, None)

    def restamp(self) -> None:
        """A placement took a while: no call in flight was late meanwhile."""
        self._pending = {r: (n, time.monotonic()) for r, (n, _) in self._pending.items()}

    def step(self, timeout_s: float) -> bool:
        """Waits up to `timeout_s` for an answer, then handles the answers and the late
        calls; False when one of them ends the program."""
        ready = []
        if self._pending:
            ready, _ = ray.wait(list(self._pending), num_returns=1, timeout=timeout_s)
        else:  # only nodes waiting out their backoff or their next call
            time.sleep(timeout_s)
        return self._answered(ready) and self._late()

    def call_again(self) -> None:
        """A new watch call to each unreachable host whose _RETRY_S is over."""
        now = time.monotonic()
        for name, (n, when) in list(self._retry.items()):
            if when <= now:
                del self._retry[name]
                self.renew(n)

    def _answered(self, ready: list) -> bool:
        """Handles finished watch calls; False when the program is to stop."""
        for ref in ready:
            if ref not in self._pending:  # its node was removed meanwhile
                continue
            n, _ = self._pending.pop(ref)
            code, asked, err = _answer(ref)
            if err is not None:
                if not self._unreachable(n, err):
                    return False
                continue
            if n.unreachable_since is not None:
                gone = time.monotonic() - n.unreachable_since
                self._say(f"{n.name}'s host answers again after {gone:.1f} s; nothing moved")
                n.unreachable_since = None
            if asked:
                return False
            if code is None:
                self.renew(n)
            elif code != 0 and not self._on_exit(n, nodeproc.exit_cause(code)):
                return False
        return True

    def _late(self) -> bool:
        """Hosts whose watch call is overdue are unreachable; False when that ends the
        program."""
        now = time.monotonic()
        for ref, (n, t) in list(self._pending.items()):
            if ref in self._pending and now - t > WATCH_S + _LATE_S:  # (a loss drops some)
                del self._pending[ref]
                if not self._unreachable(n, None, since=t + WATCH_S):
                    return False
        return True

    def _unreachable(self, n: Node, err: Exception | None, since: float | None = None) -> bool:
        """`n`'s host failed its watch call with `err`, or did not answer it (None) when it
        was due, at `since` (monotonic; default now).

        Lost when Ray's verdict says so (`on_lost`). Otherwise called again after
        _RETRY_S: a network pause costs nothing more than the wait. False when the
        loss ends the program."""
        now = time.monotonic()
        if n.unreachable_since is None:
            n.unreachable_since = now if since is None else since
            what = type(err).__name__ if err is not None else "no answer"
            self._say(
                f"{n.name}'s host on {n.machine()} is unreachable ({what}); waiting for Ray's "
                f"verdict on its node, at most {UNREACHABLE_GRACE_S:.0f} s"
            )
        lost = self._table.verdict(n, err, now)
        if lost:
            n.unreachable_since = None
            return self._on_lost(n, lost)
        self._retry[n.name] = (n, now + _RETRY_S)
        return True
