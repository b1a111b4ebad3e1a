"""The host actors of one Ray launch: one `nodehost.NodeHost` per Launchpad node, made
with its group's options (`placement.placement_options`), located (its Ray node, IP and
a free port on that machine for every `lp.Address` its node owns), its addresses bound
there, its node started, and killed at the end; `placement.json` says where each runs.

Binding each address to `staging.HostPortAddress(ip, port)` before the pickles are made
is what makes a handle resolve to the serving node's machine wherever it is
dereferenced (docs/decisions.md, "Servers listen where they should, through a bind()
shim").
"""

import collections
import contextlib
import os
import time

import ray

from distrl import files
from distrl.program import staging
from distrl.program.errors import LaunchError
from distrl.program.ray import nodehost
from distrl.program.ray.nodes import Node
from distrl.records import rundir

PLACEMENT_FILE = "placement.json"
PLACEMENT_TIMEOUT_S = 120.0
RPC_TIMEOUT_S = 30.0
# Between new hosts that died at once: a pause, not a busy loop.
_PLACE_AGAIN_PAUSE_S = 0.2


class Hosts:
    """Makes, places, binds, starts and kills the host actors of the nodes of a run."""

    def __init__(self, run_dir: str, say):
        self._run_dir = run_dir
        self._say = say  # a line for the terminal and the launcher's log
        run_name = os.path.basename(os.path.normpath(run_dir))
        self._prefix = f"{run_name}-{int(time.time())}"
        self._host_class = ray.remote(nodehost.NodeHost)
        self._made = collections.Counter()  # node name -> host actors made for it
        self.retired = []  # host actors of nodes placed again elsewhere: killed at the end

    def _new(self, n: Node):
        made = self._made[n.name]  # a node placed again, or an actor id used again
        suffix = f"#{made}" if made else ""  # ... gets a name of its own
        self._made[n.name] += 1
        return self._host_class.options(
            name=f"{self._prefix}/{n.name}{suffix}", max_restarts=0, **n.options
        ).remote(self._run_dir, n.name)

    def place(self, nodes: list[Node]) -> None:
        """A host for each of `nodes` at the launch, located and its addresses bound;
        LaunchError when the cluster did not place them all in PLACEMENT_TIMEOUT_S."""
        for n in nodes:
            n.host = self._new(n)
        refs = {n.host.locate.remote(len(n.node.addresses)): n for n in nodes}
        ready, pending = ray.wait(list(refs), num_returns=len(refs), timeout=PLACEMENT_TIMEOUT_S)
        if pending:
            waiting = ", ".join(f"{refs[r].name} {refs[r].options}" for r in pending)
            raise LaunchError(
                f"the Ray cluster did not place these nodes within {PLACEMENT_TIMEOUT_S:.0f} s "
                f"(busy or missing resources): {waiting}"
            )
        for ref in ready:
            refs[ref].where = ray.get(ref)
        for n in nodes:
            _bind(n)

    def place_again(self, moved: list[Node], timeout_s: float = PLACEMENT_TIMEOUT_S):
        """New hosts for nodes whose Ray node was lost (or actors added), placed by the
        cluster with their group's options, their addresses bound to the new machine's
        new ports. Returns None, or (a node, why) when one was not placed within
        `timeout_s`.

        Ray learns that a machine is gone only when its health checks give up (seconds
        later), while the watch calls to its hosts fail at once: until then it may
        put a new host on that very machine, where it dies with it. Such a host is
        replaced by another until the time is up.
        """
        deadline = time.monotonic() + timeout_s
        waiting = {}
        for n in moved:
            n.host = self._new(n)
            waiting[n.host.locate.remote(len(n.node.addresses))] = n
        while waiting:
            left = deadline - time.monotonic()
            ready, _ = ray.wait(list(waiting), num_returns=1, timeout=max(left, 0))
            if not ready:
                n = next(iter(waiting.values()))
                return n, TimeoutError(f"not placed within {timeout_s:.0f} s ({n.options})")
            n = waiting.pop(ready[0])
            try:
                n.where = ray.get(ready[0])
            except ray.exceptions.RayActorError as err:
                self._say(f"{n.name}'s new host died ({type(err).__name__}); placing it again")
                self.retired.append(n.host)
                time.sleep(_PLACE_AGAIN_PAUSE_S)
                n.host = self._new(n)
                waiting[n.host.locate.remote(len(n.node.addresses))] = n
                continue
            _bind(n)
        return None

    def pickled(self, n: Node) -> bytes:
        """The node's function with every address as bound now."""
        return staging.pickled(n, os.path.join(self._run_dir, rundir.TMP_DIR))

    def start(self, nodes: list[Node], envs: dict) -> None:
        """Starts each of `nodes` on its host for the first time (its pid in `where`)."""
        starts = [n.host.start.remote(self.pickled(n), envs[n.label], n.output) for n in nodes]
        for n, pid in zip(nodes, ray.get(starts, timeout=RPC_TIMEOUT_S)):
            n.where["pid"] = pid

    def start_again(self, n: Node, envs: dict, attempt: int) -> None:
        """Starts `n`, which exited, on its host as start number `attempt` (a new
        pickle: handles as bound now)."""
        start = n.host.start.remote(self.pickled(n), envs[n.label], n.output, attempt)
        n.where["pid"] = ray.get(start, timeout=RPC_TIMEOUT_S)

    def write_placement(self, nodes: list[Node]) -> None:
        """placement.json: where each node runs now (what its host reported, its pid)."""
        placement = {n.name: n.where for n in nodes}
        files.write_json(os.path.join(self._run_dir, PLACEMENT_FILE), placement, indent=2)

    def retire(self, n: Node) -> None:
        """Kills `n`'s host (one that only stopped answering must not run a second copy
        once `n` is placed again); `n` has none until then."""
        kill(n.host)
        self.retired.append(n.host)
        n.host = None

    def kill_all(self, nodes: list[Node]) -> None:
        """Kills the hosts of `nodes` and every retired one."""
        for host in [n.host for n in nodes if n.host is not None] + self.retired:
            kill(host)


def kill(host) -> None:
    """Kills a host actor (its node dies with it), if it still lives."""
    with contextlib.suppress(ray.exceptions.RayError, ValueError, TypeError):
        ray.kill(host, no_restart=True)


def _bind(n: Node) -> None:
    """Each of the node's addresses to a port its host found free on its machine."""
    for address, port in zip(n.node.addresses, n.where["ports"]):
        address.bind(staging.HostPortAddress(n.where["ip"], port))
