"""When and where a failed node of a Ray launch starts again.

A node exiting non-zero, or whose host is lost, is recorded in `failures/` with its host
and, while the restart policy allows (`program.restarts`, as under local_mp), started
again after its backoff: on the same host (same machine and ports, so every handle to it
stays valid), or, when its host was lost, on a new host the cluster places with its
group's options, its addresses bound to that machine's new ports. The nodes that hold a
handle to a node that moved (`staging.holders`: a lost replay's are the learner, the
actors and the evaluator) carry its old address in their pickles, so each is restarted
on its own host from a pickle made after the rebind, listed as a restart with the cause
"restarted: replay moved to <host>" (not counted against its own `config.restart`: it
did not fail). What a node loads when it starts again is the same wherever it runs,
from the shared run directory: the replay Reverb's newest checkpoint, the learner its
newest checkpoint, the counter its totals.
"""

import time

import ray

from distrl.program import nodeproc, restarts, stopping
from distrl.program.ray.hosts import RPC_TIMEOUT_S, Hosts
from distrl.program.ray.nodes import Node, Run
from distrl.program.ray.watch import Watch
from distrl.records import failures


class Recovery:
    """The failed nodes of a run waiting out their backoff, and their starts again."""

    def __init__(self, run: Run, hosts: Hosts, watch: Watch, policy: restarts.RestartPolicy):
        self._run = run
        self._hosts = hosts
        self._watch = watch
        self._policy = policy
        self._due = {}  # node name -> (node, when to start it again)

    @property
    def waiting(self) -> bool:
        """Whether a node waits out its backoff."""
        return bool(self._due)

    def forget(self, n: Node) -> None:
        """`n` left the run (an actor removed): not started again, its counts gone."""
        self._due.pop(n.name, None)
        self._policy.forget(n.name)

    def failed(self, n: Node, why: str, host_lost: bool) -> bool:
        """Records a node's exit or loss; True when it will be started again (after its
        backoff, `config.restart`), False when it ends the program."""
        cause = self._record(n, why)
        failures.annotate_failure(self._run.run_dir, n.name, n.describe())
        restart = self._policy.after_failure(n.name, cause, host=n.machine())
        if restart is None:
            self._run.say(f"{n.name} {cause} on {n.machine()}; stopping the program")
            return False
        self._watch.forget(n)
        if host_lost:
            self._hosts.retire(n)
        where = "on another machine" if host_lost else "on the same host"
        holders = ", ".join(h.name for h in n.holders) if host_lost else ""
        self._run.say(
            f"{n.name} {cause} on {n.machine()}; starting it again {where} in "
            f"{restart.delay:.1f} s ({restart.describe()})"
            + (f", then the nodes that hold its address: {holders}" if holders else "")
        )
        self._due[n.name] = (n, time.monotonic() + restart.delay)
        return True

    def start_due(self) -> bool:
        """Starts the failed nodes whose backoff is over, then restarts the live holders of
        any that moved to another machine; False when one cannot be started."""
        now = time.monotonic()
        due = [n for n, when in self._due.values() if when <= now]
        if not due:
            return True
        for n in due:
            del self._due[n.name]
        moved = [n for n in due if n.host is None]
        unplaced = self._hosts.place_again(moved)  # every move bound before any pickle is made
        if unplaced:
            return self._cannot_start(*unplaced)
        for n in due:
            try:
                self._start_again(n)
            except (ray.exceptions.RayError, TimeoutError) as err:
                return self._cannot_start(n, err)
        for n in due:
            self._watch.renew(n)
        ok = self._restart_holders(self._holders_of(moved, started=due))
        self._watch.restamp()  # a placement may take a while: no call was late meanwhile
        return ok

    def _start_again(self, n: Node) -> None:
        """Starts a failed node on its host (a new pickle: handles as bound now)."""
        self._hosts.start_again(n, self._run.envs, self._policy.attempt(n.name))
        self._hosts.write_placement(self._run.nodes)
        self._run.say(f"{n.name} started again on {n.machine()}, pid {n.where['pid']}")

    def _cannot_start(self, n: Node, err: Exception) -> bool:
        """Records that `n` could not be started again; False (the program stops)."""
        self._run.say(f"{n.name} could not be started again ({type(err).__name__}); stopping")
        self._record(n, f"could not be started again: {err}".splitlines()[0])
        return False

    def _holders_of(self, moved: list[Node], started: list[Node]) -> dict:
        """{name: (node, causes)} of the running nodes that hold a handle to a node in
        `moved` (but not those just `started`, or waiting to be)."""
        causes = {}
        for m in moved:
            for h in m.holders:
                if h.host is not None and h.name not in self._due and h not in started:
                    causes.setdefault(h.name, (h, []))[1].append(f"{m.name} moved to {m.machine()}")
        return causes

    def _restart_holders(self, causes: dict) -> bool:
        """Restarts, on their own hosts, the holders of moved nodes (`_holders_of`): their
        pickles carry its old address, so each starts from one made now (the learner from
        its checkpoint, as after any restart). They stop as at the end of a run (SIGTERM:
        the learner writes its final checkpoint), all at once. Not counted against their
        own `config.restart` (they did not fail), but listed, with the cause. False when
        one cannot be restarted and that ends the program."""
        if not causes:
            return True
        grace = stopping.termination_notice_secs()
        refs = {}
        for h, why in causes.values():
            cause = "restarted: " + "; ".join(why)
            failures.record_failure(self._run.run_dir, h.name, cause)
            self._policy.listed(h.name, cause, 0.0, host=h.machine())
            self._watch.forget(h)
            payload = self._hosts.pickled(h)
            env, attempt = self._run.envs[h.label], self._policy.attempt(h.name)
            refs[h.host.restart.remote(payload, env, h.output, attempt, grace)] = h
            self._run.say(f"{h.name} on {h.machine()} {cause}")
        ray.wait(list(refs), num_returns=len(refs), timeout=grace + RPC_TIMEOUT_S)
        ok = True
        for ref, h in refs.items():
            try:
                h.where["pid"] = ray.get(ref, timeout=0.1)
            except (ray.exceptions.RayError, TimeoutError) as err:
                lost = f"its Ray node was lost ({type(err).__name__})"
                ok = self.failed(h, lost, host_lost=True) and ok
                continue
            self._run.say(f"{h.name} started again on {h.machine()}, pid {h.where['pid']}")
            self._watch.renew(h)
        self._hosts.write_placement(self._run.nodes)
        return ok

    def _record(self, n: Node, why: str) -> str:
        """The failure report of a node that exited or was lost (`nodeproc.record_exit`);
        returns its first line."""
        return nodeproc.record_exit(self._run.run_dir, n.name, why, n.output)
