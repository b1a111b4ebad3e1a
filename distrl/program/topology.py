"""Stage 7 of the data flow: the topology, `make_program(experiment) -> lp.Program`.

Wires the node groups (replay, counter, learner, actor x N, evaluator) with
Launchpad's public API only; launching it is `distrl.program.launcher`'s job (on
this machine) or `distrl.program.ray.cluster`'s (on a Ray cluster). The actor,
learner and evaluator get `distrl.program.lifecycle.LAUNCHPAD` as their lifecycle:
Launchpad's stop, and their process ends with their body.
"""

import datetime
import functools

import launchpad as lp

from distrl import checkpoints, files, replay
from distrl.nodes import lifecycle
from distrl.nodes.actor import Actor
from distrl.nodes.counter import Counter, state_file
from distrl.nodes.evaluator import Evaluator
from distrl.nodes.learner import Learner
from distrl.program.lifecycle import LAUNCHPAD

_RPC_TIMEOUT = datetime.timedelta(seconds=3)


def make_tables(experiment) -> list:
    """The replay node's Reverb tables: its pipeline's (built in the node)."""
    return experiment.pipeline.make_tables(experiment.config, experiment.env)


def make_program(experiment, run_dir: str, start_time: float, restored=None) -> lp.Program:
    """The distributed experiment (`distrl.experiment.Experiment`) as one `lp.Program`.

    `restored` is the manifest of the checkpoint a resumed run continues (None for
    a fresh run): the counter starts from its totals, the learner from its state,
    and each actor from its share of its env steps; the replay from the checkpoint
    at its "replay_checkpoint" path, when the launcher chose one.
    """
    config = experiment.config
    counts = dict(restored["counts"]) if restored else {}
    program = lp.Program("distrl")
    with program.group("replay"):
        replay_handle = program.add_node(
            lp.ReverbNode(
                functools.partial(make_tables, experiment),
                checkpoint_ctor=functools.partial(
                    replay_checkpointer, run_dir, (restored or {}).get("replay_checkpoint")
                ),
            )
        )
    with program.group("counter"):
        counter = program.add_node(lp.CourierNode(Counter, counts, state_file(run_dir)))
    with program.group("learner"):
        learner = program.add_node(
            lp.CourierNode(
                Learner,
                experiment,
                replay_handle,
                counter,
                run_dir,
                start_time,
                restored is not None,
                lifecycle=LAUNCHPAD,
            )
        )
    # Bounded RPCs: a call to a node that has already stopped fails instead of
    # blocking its caller (and, through courier's client teardown, its exit). Counts
    # are fire-and-forget and the counter starts first, so they need not wait for it.
    counter.set_client_kwargs(call_timeout=_RPC_TIMEOUT, wait_for_ready=False)
    learner.set_client_kwargs(call_timeout=_RPC_TIMEOUT)
    actors = ActorMaker(experiment, replay_handle, learner, counter, run_dir)
    start_steps = int(counts.get("env_steps", 0)) // config.num_actors
    with program.group("actor"):
        for actor_id in range(config.num_actors):
            program.add_node(actors.node(actor_id, config.num_actors, start_steps))
    with program.group("evaluator"):
        program.add_node(
            lp.CourierNode(
                Evaluator,
                experiment,
                learner,
                counter,
                replay_handle,
                run_dir,
                start_time,
                counts,
                lifecycle=LAUNCHPAD,
            )
        )
    program.more_actors = actors  # the supervisor's, for actors added during the run
    return program


class ActorMaker:
    """Makes actor nodes wired to a program's replay, learner and counter: those of the
    program at its build, and those a scale request adds while it runs."""

    def __init__(self, experiment, replay_handle, learner, counter, run_dir: str):
        self._experiment = experiment
        self._inputs = (replay_handle, learner, counter, run_dir)
        self._counter_file = state_file(run_dir)

    def node(self, actor_id: int, count: int, start_steps: int) -> lp.CourierNode:
        """Actor `actor_id`, one of `count`: its exploration is that of actor `actor_id`
        in a run of `count` actors (the Ape-X spread, and the schedule counting `count`
        actors' steps), its env steps counted from `start_steps`."""
        experiment = self._experiment
        if count != experiment.config.num_actors:
            config = experiment.config.copy_and_resolve_references()
            config.num_actors = count
            experiment = experiment.with_config(config)
        return lp.CourierNode(
            Actor, experiment, actor_id, *self._inputs, start_steps, lifecycle=LAUNCHPAD
        )

    def added(self, actor_id: int, count: int) -> lp.CourierNode:
        """An actor added during the run: it starts its env steps at its share of the
        run's total so far (the counter's file), as a resumed run's actors do, so its
        schedule continues the run's and its seed differs from any earlier actor's of
        that id (`Actor` folds its start into its key)."""
        try:
            total = float(files.read_json(self._counter_file).get("env_steps", 0.0))
        except (OSError, ValueError, AttributeError):
            total = 0.0
        return self.node(actor_id, count, int(total) // count + 1)


def replay_checkpointer(run_dir: str, resumed_from: str | None):
    """Reverb's checkpointer of the replay node, made in its process as it starts.

    Its first start loads `resumed_from` (a resume's replay checkpoint, chosen and
    verified by the launcher; None: an empty table). A restart during the run
    (`lifecycle.attempt() > 0`) loads the newest checkpoint that passes the same
    checks, else an older one, else none (`checkpoints.pairs.for_restart`, one log
    line saying which and what it skipped).
    """
    if lifecycle.attempt() > 0:
        resumed_from = checkpoints.pairs.for_restart(run_dir)
    return replay.make_checkpointer(checkpoints.replay.reverb_dir(run_dir), resumed_from)
