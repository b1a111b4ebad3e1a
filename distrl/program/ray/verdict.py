"""Ray's verdict on a machine: is an unreachable host lost, or may it come back?

A host that fails a call as unreachable (`ActorUnavailableError`) or does not answer
one is not lost by that: a network pause does both. It is lost on Ray's verdict: its
Ray node dead in Ray's node table (the GCS's health checks gave up on it), its actor
dead (a call failed otherwise than as unavailable), or when it has not answered for
`UNREACHABLE_GRACE_S` while Ray still counts its node alive (a partition the health
checks do not see). docs/decisions.md, "A host is lost on Ray's verdict, not on a failed
call".
"""

import ray

from distrl.program.ray.nodes import Node

# The most a host may stay unreachable while Ray counts its node alive; Ray's verdict,
# when it comes first, decides at once.
UNREACHABLE_GRACE_S = 60.0
# How often Ray's node table (the GCS's verdict on each node) is read while a host is
# unreachable, or while the run follows the cluster.
NODES_READ_S = 1.0


class NodeTable:
    """Ray's node table as last read: which Ray nodes are alive."""

    def __init__(self):
        self._alive: dict[str, bool] = {}  # Ray node id -> Alive
        self._read_at = 0.0  # monotonic time of the last read

    def read(self, now: float) -> list[dict] | None:
        """Reads the table (at monotonic time `now`) and returns it; None when the GCS
        did not answer (it may be slow: read it next time)."""
        try:
            table = ray.nodes()
        except Exception:  # noqa: BLE001 - the GCS may be slow; read it next time
            return None
        self._alive = {m["NodeID"]: m["Alive"] for m in table}
        self._read_at = now
        return table

    def machine_left(self, n: Node) -> bool:
        """Whether Ray counts `n`'s machine dead (its node table as last read)."""
        return self._alive.get((n.where or {}).get("ray_node")) is False

    def verdict(self, n: Node, err: Exception | None, now: float) -> str:
        """Why `n`'s host, unreachable since `n.unreachable_since` after a failed call
        (`err`) or none answered (None), counts as lost, or "" while it may come back."""
        died = isinstance(err, ray.exceptions.RayActorError) and not isinstance(
            err, ray.exceptions.ActorUnavailableError
        )
        if died or now - self._read_at >= NODES_READ_S:  # a dead actor: is its node too?
            self.read(now)
        gone = now - n.unreachable_since
        if self.machine_left(n):
            return f"its Ray node was lost (Ray marked it dead; unreachable for {gone:.1f} s)"
        if died:
            return f"its host was lost ({type(err).__name__})"
        if gone >= UNREACHABLE_GRACE_S:
            return f"its host did not answer for {gone:.0f} s while Ray counted its node alive"
        return ""
