"""Stage 6 of the data flow: the learner node, from Reverb batches to new params.

Pulls batches through Reverb's prefetching dataset; a feed thread (`nodes.feed`)
reshapes them into the agent's batch (its pipeline's `learner_batch`), stacks
`learner.updates_per_call` of them and starts their copy to the learner's device
while the current update runs; the learner applies the jitted update (K updates in
one call: `Agent.update_many`) and serves `(version, params)` to actors and the
evaluator. The version is the number of updates applied. Params are copied to the host only when
someone asks for them, so serving costs the update loop nothing.

Every `log.every_seconds` it writes a metrics row to `logs/learner.csv` (updates,
updates/s, samples/s, losses, parameter version, time waiting for data); every
`checkpoint.every_seconds` and when the run ends it checkpoints its state, the
counter's totals and Reverb's tables (`distrl.checkpoints`). A resumed run starts
from that checkpoint instead of `agent.init`.
"""

import collections
import functools
import os
import threading
import time
from typing import NamedTuple

import jax
import numpy as np
from absl import logging

from distrl import agents, checkpoints, metrics, pipelines, replay
from distrl.nodes import counter as counter_lib
from distrl.nodes import feed as feed_lib
from distrl.nodes import lifecycle as lifecycle_lib
from distrl.types import CoreChunk

_REPORT_SECONDS = 0.1  # counts reach the counter (and result.json) at most this late


def num_transitions(batch) -> int:
    """Transitions in a learner batch: N for QTransition [N], T * N for [T, N] (a
    recurrent core's `CoreChunk` counts its chunk)."""
    if isinstance(batch, CoreChunk):
        batch = batch.chunk
    leaf = batch.reward  # one per transition (an action may have dims of its own)
    return int(np.prod(leaf.shape))


class Learner:
    """Courier node: `run()` trains until the program stops; `step()` makes one update;
    `get_params()` serves.

    `run()` is `step` in a loop (DQN: `learner.updates_in_flight` at once, `_loop`), plus the
    final checkpoint when the program stops. A
    test launches the program with the node's run disabled, dereferences it and calls
    `step()`.
    """

    def __init__(
        self,
        experiment,
        replay_client,
        counter,
        run_dir: str,
        start_time: float,
        restore: bool = False,
        lifecycle=None,
    ):
        self._experiment = experiment  # `distrl.experiment`: built once, in this process
        self._config = experiment.config
        self._lifecycle = lifecycle or lifecycle_lib.InProcess()  # `distrl.nodes.lifecycle`
        self._run_dir = run_dir
        self._counter = counter
        self._start = start_time  # the run's start; earlier for a resumed run
        self._restore = restore
        self._lock = threading.Condition()  # notified when a new version is published
        self._state = None
        self._version = 0
        self._priorities = None  # replay.PriorityUpdater under prioritized replay
        self._should_stop = self._lifecycle.stop_flag()  # built in the node's thread; any thread's
        # Every replay call of the learner (dataset, priorities, checkpoints) goes
        # through one connection, renewed once for all of them after a replay restart.
        self._connection = (  # None: a learner made only to load its state (tests)
            replay.Connection(replay_client, self._should_stop, "the learner")
            if replay_client is not None
            else None
        )
        self._training = None  # _Training, once started
        self._pending = collections.deque()  # _Dispatched updates, oldest first

    def wait_params(self, after_version: int, timeout_s: float):
        """`get_params()` once the version exceeds `after_version`, or after `timeout_s`."""
        with self._lock:
            self._lock.wait_for(lambda: self._version > after_version, min(timeout_s, 2.0))
        return self.get_params()

    def max_priority(self) -> float:
        """The priority new items get: the largest one written so far (1.0 at first)."""
        updater = self._priorities
        return updater.max_priority if updater is not None else 1.0

    def get_params(self):
        """(version, params as numpy pytree); version -1 before the first init."""
        with self._lock:
            state, version = self._state, self._version
        if state is None:
            return -1, None
        return version, jax.device_get(state.params)

    def run(self) -> None:
        with self._lifecycle.guard("learner", self._run_dir):
            self._run()

    def step(self):
        """One update on the next batch sampled from replay (waits until there is one).

        Returns {version (after the update), the update's scalar metrics}, or None when
        the program stopped first. The first call starts training (initial state,
        dataset). Each step publishes, reports and checkpoints as the loop's do; only
        the final checkpoint at the stop is `run()`'s.
        """
        if self._training is None:
            if not replay.wait_for_server(self._connection.client, self._should_stop):
                return None
            self._training = self._begin()
        group, waited = _timed_next(self._training.feed)
        if group is None:
            return None
        self._dispatch(self._training, group, waited)
        metrics_ = self._finish_oldest(self._training)
        scalars = {k: float(v) for k, v in jax.device_get(metrics_).items()}
        return dict(version=self._version, **scalars)

    def _run(self) -> None:
        training = self._begin()
        final = _FinalCheckpoint(
            lambda replay_timeout_s: training.saver.save(
                *self._published(),
                training.report.counts(self._version),
                self._elapsed(),
                replay_timeout_s=replay_timeout_s,
            ),
            self._lifecycle,
        )
        try:
            if replay.wait_for_server(self._connection.client, self._should_stop):
                self._loop(training)
        finally:
            if self._priorities is not None:
                self._priorities.close()
            training.report.close()
        # The final checkpoint, what `--resume` continues from after a stop. The
        # program is stopping, so Reverb gets little time (the launcher kills after 10 s).
        final.save(replay_timeout_s=3.0)
        logging.info("learner: stopped after %d updates", self._version)

    def _begin(self) -> "_Training":
        """Publishes the initial state and builds the update loop's parts."""
        c = self._config
        env, agent, pipeline = (
            self._experiment.env,
            self._experiment.agent,
            self._experiment.pipeline,
        )
        state, version, counts = self.initial_state(agent)
        with self._lock:  # published only now: a resumed run never serves fresh params
            self._state, self._version = state, version
        replay_checkpoint = functools.partial(
            replay.checkpoint, self._connection, keep_in=self._run_dir, keep=c.checkpoint.keep
        )
        saver = checkpoints.learner.Saver(
            checkpoints.learner.directory(self._run_dir),
            c.checkpoint.every_seconds,
            c.algorithm,
            replay_checkpoint if c.checkpoint.replay else None,
            keep=c.checkpoint.keep,
        )
        report = _Report(
            metrics.MetricsLogger(self._run_dir, "learner", c.log.every_seconds), counts
        )
        if pipeline.prioritized(c):
            self._priorities = replay.PriorityUpdater(self._connection)
        reader = replay.iterate_batches(
            self._connection.address,
            pipeline.signature(c, env),
            pipeline.reading(c),
            self._should_stop,
            connection=self._connection,
        )
        platform = jax.default_backend()
        logging.info("learner: updating on %s (%s)", platform, jax.devices()[0].device_kind)
        feed = feed_lib.Feed(
            reader,
            pipeline.learner_batch,
            c.learner.updates_per_call,
            feed_lib.device_put_for(platform),
            self._should_stop,
            ahead=not pipeline.reading(c).consumed,
        )
        return _Training(agent, pipeline, feed, report, saver)

    def _published(self):
        with self._lock:
            return self._state, self._version

    def initial_state(self, agent):
        """(TrainingState, version, counts): agent.init, or the run's checkpoint.

        A learner restarted after its process died (`lifecycle.attempt() > 0`, of
        `distrl.nodes.lifecycle`) loads the run's newest checkpoint too. Restarted or
        resumed, it publishes versions above every one served before whose params
        may differ from its checkpoint's (actors take only newer versions; a kill
        after the checkpoint served later ones), from the counter's record, and
        starts its counts from that record (`counter.resumed_counts`), so neither goes back.
        """
        state = agent.init(jax.random.PRNGKey(self._config.seed))
        restarted = lifecycle_lib.attempt() > 0
        ckpt_dir = checkpoints.learner.directory(self._run_dir)
        version, counts = 0, {}
        if self._restore or (restarted and os.path.isdir(ckpt_dir) and os.listdir(ckpt_dir)):
            state, manifest = checkpoints.store.load(ckpt_dir, self._config.algorithm, state)
            version, counts = manifest["version"], manifest.get("counts", {})
            logging.info("learner: resumed from version %d", version)
        if self._restore or restarted:
            counts = counter_lib.resumed_counts(counts, counter_lib.state_file(self._run_dir))
            served = int(counts.get("param_version", 0))
            if restarted or served > version:
                version = max(version, served + 1)
                logging.info("learner: publishing from version %d (above those served)", version)
        return jax.device_put(state), version, counts

    def _loop(self, training: "_Training") -> None:
        """Updates until the program stops, with `learner.updates_in_flight` (DQN)
        updates dispatched before the oldest is waited for, so the host's dispatch
        overlaps the device's compute; 0 waits for each (docs/decisions.md, "DQN reads
        8 batches per dataset read")."""
        in_flight = self._config.learner.updates_in_flight
        overlapped(
            _timed(training.feed),
            lambda timed: self._dispatch(training, *timed),
            lambda: self._finish_oldest(training),
            lambda: len(self._pending),
            in_flight,
        )

    def _dispatch(self, training: "_Training", group: feed_lib.Group, waited: float) -> None:
        """Starts one jitted call of the group's updates (`learner.updates_per_call`: K
        batches in one `update_many`), after every call already started.

        Under prioritized replay the loss is weighted by importance weights (their new
        priorities go to the table once the call is finished).
        """
        start = time.perf_counter()
        dispatched = self._version + sum(p.updates for p in self._pending)  # before these
        samples = group.samples
        latest = self._pending[-1].state if self._pending else self._state
        weights = self._weights(training.pipeline, samples, dispatched)
        state, metrics_ = _apply(training.agent, latest, group.batch, weights, len(samples))
        self._pending.append(
            _Dispatched(
                state,
                metrics_,
                np.concatenate([s.info.key for s in samples]),
                waited,
                time.perf_counter() - start,
                sum(num_transitions(s.data.data) for s in samples),
                # data age of each sampled item [K items], in updates before its own
                np.concatenate(
                    [dispatched + i - np.asarray(s.data.version) for i, s in enumerate(samples)]
                ),
                len(samples),
            )
        )

    def _weights(self, pipeline, samples, dispatched: int):
        """Prioritized replay's importance weights of each sample's transitions, [K * k * B]
        each (DQN: an item's weight for each of its k x B transitions); None otherwise."""
        if self._priorities is None:
            return None
        per_item = pipeline.weights_per_item(self._config)
        return [
            replay.transition_weights(
                s.info, replay.importance_exponent(self._config, dispatched + i), per_item
            )
            for i, s in enumerate(samples)
        ]

    def _finish_oldest(self, training: "_Training"):
        """Waits for the oldest update in flight, then publishes, reports and maybe
        checkpoints it; returns its metrics (on the device)."""
        update = self._pending.popleft()
        start = time.perf_counter()
        # Publish only finished updates: with unbounded async dispatch the version runs
        # ahead of the params get_params can return, and get_params waits for the whole
        # backlog (docs/decisions.md, "The learner publishes only finished updates").
        jax.block_until_ready(update.state.step)
        metrics_ = dict(update.metrics)
        priorities = metrics_.pop("priorities", None)  # [(K,) N] |TD|, DQN only
        if self._priorities is not None:
            self._priorities.submit(update.keys, priorities)
        if update.updates > 1:  # [K, ...] per update: report the last one's
            metrics_ = jax.tree.map(lambda x: x[-1], metrics_)
        with self._lock:
            self._state, self._version = update.state, self._version + update.updates
            self._lock.notify_all()
        report = training.report
        busy = update.dispatch_seconds + time.perf_counter() - start
        report.add(metrics_, update.waited, busy, update.transitions, update.ages, update.updates)
        report.maybe_send(self._counter, self._version)
        if training.saver.due():
            state = update.state
            training.saver.save(state, self._version, report.counts(self._version), self._elapsed())
        return metrics_

    def _elapsed(self) -> float:
        return time.time() - self._start


def _apply(agent, state, batch, weights, updates: int):
    """(state, metrics) after `updates` updates on `batch` (one agent batch, or K stacked
    [K, ...] for `update_many`) with importance `weights` (one array per update, or None)."""
    if updates == 1:
        return agent.update(state, batch, *(weights or ()))
    if weights is None:
        return agent.update_many(state, batch)
    return agent.update_many(state, batch, np.stack(weights))


def _timed_next(feed):
    """(next group | None once the feed ended, seconds the learner waited for it)."""
    start = time.perf_counter()
    group = next(feed, None)
    return group, time.perf_counter() - start


def _timed(feed):
    """Each group of `feed` with the seconds the learner waited for it."""
    while True:
        group, waited = _timed_next(feed)
        if group is None:
            return
        yield group, waited


def overlapped(items, start, finish, started, in_flight: int) -> None:
    """start(item) for each item, and finish() the oldest started one whenever more
    than `in_flight` are started (`started()`, the count); finish() every one left
    once `items` ends."""
    for item in items:
        start(item)
        while started() > in_flight:
            finish()
    while started():
        finish()


class _Dispatched(NamedTuple):
    """A call of updates started on the device, not yet waited for."""

    state: agents.TrainingState
    metrics: dict  # on the device ([K, ...] for K updates); DQN's include priorities
    keys: np.ndarray  # the sampled items' keys (their priorities are updated once done)
    waited: float  # seconds the learner waited for its batches
    dispatch_seconds: float
    transitions: int
    ages: np.ndarray  # data age of each sampled item, in updates
    updates: int  # in this call (learner.updates_per_call)


class _Training(NamedTuple):
    """The update loop's parts: the agent, its pipeline, the batch iterator, reporting,
    checkpoints."""

    agent: agents.Agent
    pipeline: pipelines.Pipeline
    feed: feed_lib.Feed  # the batches, grouped per call and on their way to the device
    report: "_Report"
    saver: checkpoints.learner.Saver


# A stopping learner whose loop has not ended this long after the stop (its main
# thread stuck in a native Reverb call, as after a replay node died, or when actors
# stopped first) writes its final checkpoint from another thread; Reverb's
# tables are asked for with a timeout, after the learner's own state is safe.
_FINAL_SAVE_AFTER_S = 3.0


class _FinalCheckpoint:
    """The learner's final checkpoint, written once: by the loop when it ends, or by a
    watchdog thread when the loop is still stuck `_FINAL_SAVE_AFTER_S` after the stop."""

    def __init__(self, save, lifecycle):
        self._save = save
        self._lock = threading.Lock()
        self._done = False
        # Asked here, in the node's own thread: under Launchpad both are that thread's.
        stop_event, own_process = lifecycle.stop_event(), lifecycle.in_own_process()
        threading.Thread(
            target=self._watch, args=(stop_event, own_process), name="final-checkpoint", daemon=True
        ).start()

    def _watch(self, stop_event, own_process: bool) -> None:
        stop_event.wait()
        time.sleep(_FINAL_SAVE_AFTER_S)
        if self._done:
            return
        logging.warning(
            "learner: the loop is still busy %.0f s after the stop (stuck in a "
            "native call?); writing the final checkpoint from here",
            _FINAL_SAVE_AFTER_S,
        )
        self.save(replay_timeout_s=3.0)
        if own_process:  # the stuck loop would keep the process up to its kill
            logging.warning("learner: final checkpoint written; exiting")
            logging.flush()  # absl: every handler
            os._exit(0)

    def save(self, replay_timeout_s) -> None:
        with self._lock:
            if not self._done:
                self._done = True
                self._save(replay_timeout_s)


class _Report:
    """Learner counts and the latest metrics: to the counter every 0.1 s, to the log.

    Also keeps the counter's latest totals (the answer to its own increments), so a
    checkpoint can record them without a blocking call.
    """

    def __init__(self, logger: metrics.MetricsLogger, counts: dict):
        self._log = logger
        self._updates = 0
        self._samples = 0
        self._wait = 0.0
        self._busy = 0.0
        self._metrics = {}
        self._last = time.time()
        self._totals = dict(counts)  # the counter's totals as last heard
        self._future = None
        self._age = _AgeTally()  # since the last send to the counter
        self._log_age = _AgeTally()  # since the last log row
        self._since_log = dict(updates=0.0, samples=0.0, wait=0.0)
        self._deltas = metrics.Deltas(self._since_log)

    def add(
        self, metrics_, waited: float, busy: float, transitions: int, ages, updates: int = 1
    ) -> None:
        """One call of `updates` updates: the last one's metrics, seconds waited and busy,
        transitions, item ages [items]."""
        self._updates += updates
        self._samples += transitions
        self._wait += waited
        self._busy += busy
        self._metrics = metrics_
        self._age.add(ages)
        self._log_age.add(ages)

    def maybe_send(self, counter, version: int) -> None:
        """Sends in the background, so reporting never blocks learning."""
        if not self._updates or time.time() - self._last <= _REPORT_SECONDS:
            return
        self._collect_totals()
        latest = {f"learner_{k}": float(v) for k, v in jax.device_get(self._metrics).items()}
        counts = dict(
            learner_steps=self._updates,
            learner_samples=self._samples,
            learner_wait_seconds=self._wait,
            learner_busy_seconds=self._busy,
        )
        counts.update(learner_items=self._age.items, data_age_sum=self._age.total)
        self._future = counter.futures.report(
            sums=counts,
            latest=dict(param_version=version, **latest),
            maxima=dict(data_age_max=self._age.max),
        )
        self._age = _AgeTally()
        for name, value in zip(
            ("updates", "samples", "wait"), (self._updates, self._samples, self._wait)
        ):
            self._since_log[name] += value
        self._updates = self._samples = 0
        self._wait = self._busy = 0.0
        self._last = time.time()
        self._maybe_log(version, latest)

    def counts(self, version: int) -> dict:
        """The counter's totals for a checkpoint; learner counts exact at `version`."""
        self._collect_totals()
        return dict(self._totals, learner_steps=version, param_version=version)

    def close(self) -> None:
        self._log.close()

    def _collect_totals(self) -> None:
        if self._future is not None and self._future.done():
            try:
                self._totals = dict(self._future.result())
            except Exception as err:  # noqa: BLE001 - courier raises grpc-level errors
                logging.info("learner: counter did not answer (%s)", err)
            self._future = None

    def _maybe_log(self, version: int, latest: dict) -> None:
        if not self._log.due():
            return
        self._log_age, log_age = _AgeTally(), self._log_age
        d, seconds = self._deltas.step(self._since_log)
        self._log.write(
            version,
            dict(
                updates=version,
                param_version=version,
                updates_per_s=d["updates"] / seconds,
                samples_per_s=d["samples"] / seconds,
                wait_frac=d["wait"] / seconds,
                data_age_mean=log_age.mean(),
                data_age_max=log_age.max,
                **{k[len("learner_") :]: v for k, v in latest.items()},
            ),
        )


class _AgeTally:
    """Data age of the items learned from: how many, their summed and largest age.

    An item's age is the learner's version when it updates on the item minus the
    version the actor acted with (0: the newest params; under a queue, age > 0
    means the data is off-policy by that many updates).
    """

    def __init__(self):
        self.items, self.total, self.max = 0, 0.0, 0.0

    def add(self, ages) -> None:
        self.items += len(ages)
        self.total += float(np.sum(ages))
        self.max = max(self.max, float(np.max(ages)))

    def mean(self) -> float:
        return self.total / self.items if self.items else 0.0
