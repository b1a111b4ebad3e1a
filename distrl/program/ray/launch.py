"""One launch of a program on the Ray cluster, from placement to stop: the parts
(`hosts`, `watch`, `recovery`, `scale`, `follow`) put together, and the stop.

The watch ends on a node's stop request (the evaluator at its target or budget, a
failing node's `lp.stop()`), on a failure beyond the restarts, or on Ctrl-C, SIGTERM or
SIGHUP here; then every node gets SIGTERM in local_mp's order (`stopping.stop_phases`),
SIGKILL after `--lp_termination_notice_secs`, and every host actor is killed.
"""

import shutil
import threading
import time

import ray
from absl import logging

from distrl.program import progress, restarts, scaling, stopping
from distrl.program.ray.follow import Follower
from distrl.program.ray.hosts import RPC_TIMEOUT_S, Hosts
from distrl.program.ray.nodes import Node, Run
from distrl.program.ray.recovery import Recovery
from distrl.program.ray.scale import Actors, Scale
from distrl.program.ray.verdict import NodeTable
from distrl.program.ray.watch import Watch
from distrl.records import failures

# How long the watch waits on Ray at a time before it looks at a stop signal.
_SIGNAL_POLL_S = 0.2


class Launch:
    """Places, binds, starts, watches, scales and stops the nodes of one program."""

    def __init__(self, nodes: list[Node], config, run_dir: str, envs: dict, actors: Actors):
        self._run = Run(config, run_dir, envs, nodes, self._say, time.time())
        self._line = None
        table = NodeTable()
        self._hosts = Hosts(run_dir, self._say)
        self._watch = Watch(table, self._say, self._exited, self._lost)
        self._policy = restarts.RestartPolicy(config.restart, run_dir, self._run.began)
        self._recovery = Recovery(self._run, self._hosts, self._watch, self._policy)
        self._scale = Scale(self._run, actors, (self._hosts, self._watch, self._recovery))
        self._follower = Follower(self._run, self._scale, table)

    def run(self, stream) -> list[dict]:
        """Runs the program until it stops; returns the restarts made."""
        run = self._run
        work = scaling.open_work_dir(run.run_dir, "ray")
        try:
            self._hosts.place(run.nodes)
            self._hosts.start(run.nodes, run.envs)
            self._hosts.write_placement(run.nodes)
            if self._scale.scalable:
                scaling.record_launch(run.run_dir, [n.name for n in self._scale.actor_nodes()])
            with (
                progress.ProgressLine(run.run_dir, run.config, stream) as self._line,
                stopping.stop_signals_noted() as signalled,
            ):
                self._watch_nodes(signalled, work)
            if signalled.is_set():
                logging.info("distrl: interrupted; stopping every node")
        finally:
            self._line = None
            with stopping.stop_signals_ignored():
                self._stop()
            shutil.rmtree(work, ignore_errors=True)
        for n in run.nodes:  # the host each failed node ran on, in its failure report
            failures.annotate_failure(run.run_dir, n.name, n.describe())
        return self._policy.restarts

    def _watch_nodes(self, signalled: threading.Event, work: str) -> None:
        """Returns once a node asked to stop, every node has exited, a node failed or was
        lost beyond what `config.restart` allows, or `signalled` is set (a stop signal).
        Between waits: the failed nodes whose backoff is over start again, the
        unreachable hosts are called again, and the actor count is served."""
        for n in self._run.nodes:
            self._watch.renew(n)
        while (self._watch.busy or self._recovery.waiting) and not signalled.is_set():
            if not (self._watch.step(_SIGNAL_POLL_S) and self._recovery.start_due()):
                return
            self._watch.call_again()
            self._scale.reap()
            self._follower.follow()
            self._scale.serve(work)

    def _exited(self, n: Node, cause: str) -> bool:
        """`n` exited non-zero: started again on its host, or the program stops (False)."""
        return self._recovery.failed(n, cause, host_lost=False)

    def _lost(self, n: Node, why: str) -> bool:
        """`n`'s host is lost: an actor that leaves with its machine is removed (the run
        follows the cluster); another node is placed again, or the program stops (False)."""
        return self._follower.takes_loss(n) or self._recovery.failed(n, why, host_lost=True)

    def _stop(self) -> None:
        """Stops every node (SIGTERM, then SIGKILL) and kills every host actor.

        In local_mp's order (`stopping.stop_phases`): the actors and the evaluator,
        then the learner, whose final checkpoint of Reverb's tables needs the replay
        up, then the rest. Within a phase the hosts stop their nodes at once.
        """
        placed = [n for n in self._run.nodes if n.host is not None and n.where is not None]
        grace = stopping.termination_notice_secs()
        start = time.time()
        self._scale.end(grace + RPC_TIMEOUT_S)  # removed actors still ending: theirs first
        for phase in stopping.stop_phases([n.name for n in placed]):
            self._stop_phase([n for n in placed if n.name in phase], grace, start)
        self._hosts.kill_all(self._run.nodes)

    def _stop_phase(self, placed: list, grace: float, start: float) -> None:
        refs = [n.host.stop.remote(grace) for n in placed]
        ray.wait(refs, num_returns=len(refs), timeout=grace + RPC_TIMEOUT_S)
        for n, ref in zip(placed, refs):
            try:
                code = ray.get(ref, timeout=0.1)
                logging.info(
                    "distrl: %s stopped (exit code %s) %.1f s after the stop began",
                    n.name,
                    code,
                    time.time() - start,
                )
            except (ray.exceptions.RayError, TimeoutError) as err:
                logging.warning("distrl: stopping %s: %s", n.name, err)

    def _say(self, text: str) -> None:
        """A line in the terminal (above the progress line) and in the launcher's log."""
        logging.info("distrl: %s", text)
        if self._line is not None:
            self._line.note(f"distrl: {text}")
