"""The actor count of a Ray launch, changed during the run.

A `launch/scale.py` request in the work directory (`scaling.serve`, as under local_mp)
adds actors (made by the program's `ActorMaker`, placed with the actor group's options,
bound, started and watched like the launch's; refused when the alive nodes' CPUs cannot
hold them, `placement.check_fits`) or removes the newest (their hosts stop them as at a
program stop, without holding up the watch). A run that follows the cluster changes its
count the same way (`follow`).
"""

import dataclasses
import time

import ray

from distrl.program import nodeproc, scaling, staging, stopping
from distrl.program.ray import placement
from distrl.program.ray.hosts import Hosts, kill
from distrl.program.ray.nodes import Node, Run
from distrl.program.ray.recovery import Recovery
from distrl.program.ray.watch import Watch

# How long an actor added during the run may wait for its placement before the change
# is refused (the watch of every other node waits meanwhile).
_SCALE_PLACEMENT_S = 30.0


@dataclasses.dataclass
class Actors:
    """What the launcher needs to add actors during the run (`Scale.scale_to`)."""

    maker: object  # topology.ActorMaker, or None (a program that cannot add actors)
    options: dict  # their Ray actor options
    output_dir: str  # logs/nodes/


class Scale:
    """Adds and removes the actors of a running launch."""

    def __init__(self, run: Run, actors: Actors, parts: tuple[Hosts, Watch, Recovery]):
        self._run = run
        self._actors = actors
        self._hosts, self._watch, self._recovery = parts
        self._removing = {}  # stop call of a removed actor's host -> its Node

    @property
    def scalable(self) -> bool:
        """Whether the program can make more actors (a distrl program: `topology`)."""
        return self._actors.maker is not None

    def actor_nodes(self) -> list[Node]:
        return [n for n in self._run.nodes if n.label == "actor"]

    def serve(self, work: str) -> None:
        """Serves a pending scale request in `work` (`scaling.serve`)."""
        run = self._run
        seconds = time.time() - run.began
        scaling.serve(
            work, run.run_dir, seconds, self.scale_to, lambda: len(self.actor_nodes()), run.say
        )

    def scale_to(self, count: int, cause: str, ident, first_out=()) -> scaling.Change:
        """Goes to `count` actors (`scaling.plan`; `first_out` removed first): the new
        ones placed, started and watched first, then the removed ones stopped. Raises
        ConfigError when the cluster cannot hold `count` actors (`check_fits` on its
        alive nodes), another error when the new ones could not be started (nothing
        changed then)."""
        if not self.scalable:
            raise RuntimeError("this program has no actor maker (it cannot add actors)")
        actors = [n.name for n in self.actor_nodes()]
        busy = [scaling.index(n.name) for n in self._removing.values()]
        removed, ids = scaling.plan(count, actors, busy, first_out)
        added = []
        if ids:
            scaling.check_count(self._run.config, count, local=False)
            placement.check_fits_count(self._run.config, count, placement.alive_nodes())
            added = self._add(ids, count)
        self._remove(removed)
        return scaling.Change(
            len(actors) - len(removed) + len(added), len(actors), added, removed, cause, ident
        )

    def _add(self, ids: list[int], count: int) -> list[str]:
        """Actors `ids` of `count` (`topology.ActorMaker.added`: a new seed each, the
        exploration of its place among `count`), placed with the actor group's options,
        bound, started and watched; their names. Raises (their hosts killed) when one is
        not placed within _SCALE_PLACEMENT_S or does not start."""
        new = []
        for i in ids:
            s = staging.stage_added(self._actors.maker.added(i, count), "actor", i)
            output = staging.output_path(self._actors.output_dir, s)
            new.append(Node(s.name, "actor", s.node, dict(self._actors.options), output))
        try:
            unplaced = self._hosts.place_again(new, _SCALE_PLACEMENT_S)
            if unplaced:
                raise unplaced[1]
            self._hosts.start(new, self._run.envs)
        except BaseException:
            for n in new:
                kill(n.host)
            raise
        nodes = self._run.nodes
        for n in new:
            for m in nodes:
                if staging.holds(n.node, m.node):
                    m.holders.append(n)
            nodes.append(n)
            self._watch.renew(n)
            self._run.say(f"{n.name} started on {n.machine()}, pid {n.where['pid']}")
        self._hosts.write_placement(nodes)
        self._watch.restamp()  # the placement may have taken a while: no call was late
        return [n.name for n in new]

    def _remove(self, names: list[str]) -> None:
        """Stops the actors `names` as at the end of a run (SIGTERM: each ends its rollout
        and write; SIGKILL after the termination notice), without waiting (`reap`); they
        are no longer watched, restarted or counted."""
        grace = stopping.termination_notice_secs()
        nodes = self._run.nodes
        for name in names:
            n = next(m for m in nodes if m.name == name)
            nodes.remove(n)
            self._watch.forget(n)
            self._recovery.forget(n)
            for m in nodes:
                if n in m.holders:
                    m.holders.remove(n)
            if n.host is not None:
                self._removing[n.host.stop.remote(grace)] = n
        if names:
            self._hosts.write_placement(nodes)

    def reap(self, timeout_s: float = 0.0) -> None:
        """Kills the hosts of removed actors whose node has ended, saying how it ended."""
        if not self._removing:
            return
        refs = list(self._removing)
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=timeout_s)
        for ref in ready:
            n = self._removing.pop(ref)
            try:
                code = ray.get(ref)
                how = nodeproc.exit_cause(code) if code is not None else "not running"
            except ray.exceptions.RayError as err:
                how = f"its host is gone ({type(err).__name__})"
            kill(n.host)
            self._run.say(f"{n.name} removed: {how}")

    def end(self, timeout_s: float) -> None:
        """At the stop: waits up to `timeout_s` for the removed actors still ending
        (`reap`); the hosts of those that did not end are retired (killed at the end)."""
        self.reap(timeout_s)
        self._hosts.retired.extend(n.host for n in self._removing.values())
