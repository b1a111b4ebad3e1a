"""A Ray launch whose actor count follows the cluster (`config.ray.actors="auto"`).

The watch reads Ray's node table every second (the same table whose verdict makes a
machine lost, `verdict.NodeTable`) and, when the set of alive nodes changed, removes the
actors of machines Ray marked dead (not placed again, no failure report) and goes to one
actor per `ray.actor_cpus` of the alive nodes' CPUs (`placement.follow_count`, within
`ray.min_actors`..`ray.max_actors`). Each change is one line of actors.log, cause
"cluster".
"""

import time

from distrl.config import ConfigError
from distrl.program import scaling
from distrl.program.ray import placement
from distrl.program.ray.nodes import Node, Run
from distrl.program.ray.scale import Scale
from distrl.program.ray.verdict import NODES_READ_S, NodeTable


class Follower:
    """Changes the actor count of a run (`scale`) as Ray's alive nodes change; does
    nothing unless the run follows the cluster."""

    def __init__(self, run: Run, scale: Scale, table: NodeTable):
        self._run = run
        self._scale = scale
        self._table = table
        self._on = run.config.ray.actors == "auto"
        self._followed, self._alive_seen = 0.0, None  # the last read, its alive nodes

    def takes_loss(self, n: Node) -> bool:
        """Whether `n`, whose host is lost, is an actor that leaves with its machine:
        removed (`follow`, at once), not placed again."""
        if not (self._on and n.label == "actor" and self._table.machine_left(n)):
            return False
        self.follow(force=True)
        return True

    def follow(self, force: bool = False) -> None:
        """When Ray's alive nodes changed since the last look (every NODES_READ_S; at once
        with `force`), the actors whose machine left are removed and the count goes to
        `follow_count` of the alive nodes (or, below `ray.min_actors`, stays at what is
        left)."""
        now = time.monotonic()
        if not self._on or (not force and now - self._followed < NODES_READ_S):
            return
        self._followed = now
        table = self._table.read(now)
        if table is None:
            return
        alive = frozenset(m["NodeID"] for m in table if m["Alive"])
        if alive == self._alive_seen and not force:
            return
        self._alive_seen = alive
        actors = self._scale.actor_nodes()
        left = [n.name for n in actors if self._table.machine_left(n)]
        count = self._count([m["Resources"] for m in table if m["Alive"]], len(actors) - len(left))
        try:
            change = self._scale.scale_to(count, "cluster", None, first_out=left)
        except Exception as err:  # noqa: BLE001 - a failed start must not end the run
            self._run.say(f"actors not added as the cluster grew: {type(err).__name__}: {err}")
            if not left:
                return
            kept = len(self._scale.actor_nodes()) - len(left)
            change = self._scale.scale_to(kept, "cluster", None, left)
        if change.added or change.removed:
            run = self._run
            scaling.note(run.run_dir, change, time.time() - run.began, run.say)

    def _count(self, alive_resources: list[dict], kept: int) -> int:
        """The count for these alive nodes (`placement.follow_count`), or `kept` (the
        actors whose machine did not leave) when they hold fewer than `ray.min_actors`."""
        try:
            return placement.follow_count(self._run.config, alive_resources)
        except ConfigError as err:
            self._run.say(f"{err}; the run goes on with the {kept} actors left")
            return kept
