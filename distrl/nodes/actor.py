"""Stage 6 of the data flow: the actor node, from params to Reverb items.

Each actor steps B envs with the jitted, vmapped rollout (T steps per call) using
the latest params it has, turns the chunk into items for its pipeline
(`distrl.pipelines`: n-step `QTransition`s [k, B] of k time steps for replay, the
whole `Transition` [T, B] chunk for the queue), writes them, and reports env steps
and episodes to the counter. Params arrive in the background (`ParamsClient`), so
stepping never waits on the learner after the first pull. Every `log.every_seconds`
it writes a metrics row to `logs/actor_<i>.csv` (env steps, episodes, env
steps/s, parameter version and lag, time blocked on Reverb, the writer's reconnects
after replay outages). A resumed run starts its env-step count (and with it the
exploration schedule) from its share of the checkpointed total. An env stepped in
Python (gymnasium: `envs.host_env`) is stepped by `host_rollout.HostAct` instead of
the jitted rollout, with the same items, tables and counts.
"""

import collections
import contextlib
import time

import jax
from absl import logging

from distrl import envs, metrics, packing, replay
from distrl.acting import host_rollout, rollout
from distrl.nodes.lifecycle import InProcess
from distrl.nodes.variables import ParamsClient

_REPORT_SECONDS = 0.1  # counts reach the counter (and result.json) at most this late
_IDLE_POLL_SECONDS = 0.5  # an actor past the env-step budget looks for the stop this often


def actor_epsilon(base_epsilon: float, actor_id: int, num_actors: int, spread: float) -> float:
    """Ape-X style per-actor exploration: eps ** (1 + spread * i / (N - 1))."""
    if spread <= 0 or num_actors == 1:
        return base_epsilon
    return float(base_epsilon ** (1.0 + spread * actor_id / (num_actors - 1)))


def make_act(unroll, to_items) -> packing.PackedFn:
    """One rollout and its items as one jitted call: `act(params, carry, key, epsilon,
    tail) -> ((carry, tail), packed)`, `act.unpack(packed) -> (items, stats)` as numpy.

    The items and episode statistics leave the device as one packed buffer: per-leaf
    `device_get`s cost more than the copy itself (`distrl.packing`).
    """

    def act(params, carry, key, epsilon, tail):
        carry, chunk, stats = unroll(params, carry, key, epsilon)
        items, tail = to_items(tail, chunk)
        return (carry, tail), (items, stats)

    return packing.PackedFn(act)


def _steps_in_python(experiment) -> bool:
    """True for an env stepped in Python; False too where the env cannot be made (the
    node reports that failure where it uses its env, in `_start`)."""
    try:
        return envs.is_host_env(experiment.env)
    except Exception:  # noqa: BLE001 - named later, by the node's guard
        return False


class Actor:
    """Courier node: `run()` acts until the program stops; `step()` acts one rollout.

    `run()` is `step` in a loop, except that it writes each chunk's items while the
    next chunk computes. A test launches the program with the node's run disabled,
    dereferences it and calls `step()`.
    """

    def __init__(
        self,
        experiment,
        actor_id: int,
        replay_client,
        learner,
        counter,
        run_dir: str,
        start_env_steps: int = 0,
        lifecycle=None,
    ):
        self._experiment = experiment  # `distrl.experiment`: built once, in this process
        self._config = experiment.config
        self._lifecycle = lifecycle or InProcess()  # `distrl.nodes.lifecycle`
        self._run_dir = run_dir
        self._id = actor_id
        self._replay = replay_client
        self._learner = learner
        self._counter = counter
        self._start_steps = start_env_steps  # this actor's share of a resumed run's steps
        self._should_stop = self._lifecycle.stop_flag()  # built in the node's thread; any thread's
        self._acting = None  # _Acting, once started
        if _steps_in_python(experiment):  # before any JAX backend exists
            sync = host_rollout.synchronous_dispatch()
            unrolled = host_rollout.unrolled_threefry()
            logging.info(
                "actor %d (env stepped in Python): synchronous JAX dispatch %s, straight-line "
                "threefry %s",
                actor_id,
                sync,
                unrolled,
            )

    def run(self) -> None:
        with self._lifecycle.guard(f"actor/{self._id}", self._run_dir):
            acting = self._start()
            if acting is None:
                return
            try:
                while not self._should_stop():
                    if self._budget_spent(acting):
                        self._idle(acting)
                        break
                    self._step(acting, pipelined=not acting.gate.enabled)
            finally:
                acting.writer.close()
                acting.tally.add(items_written=acting.writer.pop_written())
                acting.tally.flush(self._counter, acting.log)  # counts of its last steps
                acting.log.close()
                acting.close()
            logging.info("actor %d: stopped after %d env steps", self._id, acting.env_steps)

    def _budget_spent(self, acting: "_Acting") -> bool:
        """Whether the run's env steps, as the counter last answered this actor, reached
        `budget.env_steps`. Actors stop there themselves: the evaluator sees the budget
        only between its evaluations, and a fast pipeline would act well past it."""
        budget = self._config.budget.env_steps
        return bool(budget) and acting.tally.run_env_steps() >= budget

    def _idle(self, acting: "_Acting") -> None:
        """Delivers the chunk in flight and its counts, then waits for the program's stop."""
        if acting.pending is not None:
            self._deliver(acting)
        acting.tally.flush(self._counter, acting.log)
        logging.info("actor %d: the run's env-step budget is spent; waiting for the stop", self._id)
        while not self._lifecycle.should_stop(_IDLE_POLL_SECONDS):
            pass

    def step(self) -> dict:
        """Acts one rollout (T steps of B envs) and writes its items to replay.

        Returns {env_steps (this actor's total), items_written (confirmed by the
        server in this step), param_version (the params acted with)}; the first call
        waits for the replay server and the learner's first params.
        """
        if self._acting is None:
            self._acting = self._start()
        if self._acting is None:
            raise RuntimeError("actor: the program stopped before the actor started")
        written = self._step(self._acting, pipelined=False)
        return dict(
            env_steps=self._acting.env_steps,
            items_written=written,
            param_version=self._acting.params.version,
        )

    def _start(self):
        """Builds what acting needs (`_Acting`); None when the program stopped first."""
        c, should_stop = self._config, self._should_stop
        env, agent = self._experiment.env, self._experiment.agent
        params = ParamsClient(self._learner, c.actor.params_update_period)
        if not replay.wait_for_server(self._replay, should_stop):
            return None
        if not params.wait_first(should_stop):
            return None
        logging.info("actor %d: acting on %s", self._id, jax.default_backend())
        log = _ActorLog(
            metrics.MetricsLogger(self._run_dir, f"actor_{self._id}", c.log.every_seconds),
            self._start_steps,
        )
        # The writer owns the client from here: it replaces it after a replay outage,
        # and a second client to the server would share its connection's backoff.
        writer = replay.Writer(self._replay, should_stop, name=f"actor {self._id}'s writer")
        self._replay = None
        return _Acting(self, env, agent, params, writer, log)

    def _step(self, acting: "_Acting", pipelined: bool) -> int:
        """One rollout; writes its items, or (`pipelined`) the previous rollout's while
        this one computes. Returns the items the server confirmed in this call."""
        c, a = self._config, acting
        if a.gate.wait(self._should_stop) or a.params.update():
            a.tally.add(version_lag=a.params.last_lag, param_updates=1)
        if a.max_priority is not None:
            a.max_priority.refresh(a.writer)
        global_steps = a.env_steps * c.num_actors  # the schedule counts all actors
        epsilon = actor_epsilon(
            float(a.epsilon(global_steps)), self._id, c.num_actors, c.actor.epsilon_spread
        )
        a.key, step_key = _split_key(a.key)
        # Dispatch is asynchronous: XLA computes chunk k+1 while Python writes chunk
        # k to Reverb (docs/decisions.md, "The learner publishes only finished updates").
        (a.carry, a.tail), output = a.act(a.params.params, a.carry, step_key, epsilon, a.tail)
        written = 0
        if a.pending is not None:
            written += self._deliver(a)
        a.pending = (output, a.params.version)  # the behaviour policy's version
        # Not pipelined under the version gate: a chunk held back would stall the learner.
        if not pipelined:
            written += self._deliver(a)
        a.env_steps += c.actor.num_envs * c.actor.unroll_length
        a.tally.maybe_report(self._counter, a.log)
        a.log.maybe_write(a.params.version, epsilon, a.writer.reconnects)
        return written

    def _deliver(self, a: "_Acting") -> int:
        """Writes the pending chunk's items (stamped with their behaviour version), counts
        its steps, episodes and items; returns the items the server confirmed. A chunk
        acted with a non-finite action is never written: an `EnvError` ends the actor."""
        output, version = a.pending
        a.pending = None
        items, stats = a.act.unpack(output)
        c = self._config
        rollout.check_actions(
            stats.first_nonfinite_action,
            c.env.name,
            f"actor {self._id}",
            c.actor.num_envs,
            a.copy_steps,
        )
        a.copy_steps += c.actor.unroll_length
        a.pipeline.write(a.writer, items, version)
        written = a.writer.pop_written()
        a.tally.add(
            items_written=written,
            env_steps=int(stats.env_steps),
            episodes=int(stats.episodes),
            successes=int(stats.successes),
            return_sum=float(stats.return_sum),
            actor_blocked_seconds=a.writer.blocked_seconds,
        )
        a.writer.blocked_seconds = 0.0
        return written


@jax.jit
def _split_key(key):
    """(next key, this rollout's key): `jax.random.split` in one dispatch, not eager ops."""
    new_key, step_key = jax.random.split(key)
    return new_key, step_key


class _Acting:
    """An actor's state between rollouts: its agent, params, writer, env carry, key."""

    def __init__(self, actor: Actor, env, agent, params, writer, log):
        c = actor._config
        self.agent, self.params, self.writer, self.log = agent, params, writer, log
        self.pipeline = actor._experiment.pipeline
        to_items = self.pipeline.item_fn(agent.config, c, env)
        # One dispatch per rollout instead of the schedule's eager jnp ops.
        self.epsilon = jax.jit(agent.epsilon)
        key = jax.random.fold_in(jax.random.PRNGKey(c.seed), 1000 + actor._id)
        if actor._start_steps:  # a resumed run explores differently from the one it continues
            key = jax.random.fold_in(key, actor._start_steps)
        self.key, carry_key = jax.random.split(key)
        if envs.is_host_env(env):
            self.act = host_rollout.make_act(env, agent.policy, c, to_items)
            self.carry = self.act.init_carry(host_rollout.seed_of(carry_key))
        else:
            policy = rollout.policy_of(agent)  # a recurrent core's state lives in the carry
            self.act = make_act(rollout.make_rollout(env, policy, c.actor.unroll_length), to_items)
            self.carry = rollout.init_carry(env, carry_key, c.actor.num_envs, policy)
        self.tally, self.tail, self.env_steps = _Tally(), None, actor._start_steps
        prioritized = self.pipeline.prioritized(c)
        self.max_priority = _MaxPriority(actor._learner) if prioritized else None
        self.gate = VersionGate(params, c, self.pipeline.items_per_batch(c))
        self.pending = None  # the previous chunk's (packed output, version), not yet written
        self.copy_steps = 0  # each env copy's steps in the chunks delivered so far

    def close(self) -> None:
        """Closes the env copies of an env stepped in Python (nothing for a JAX env)."""
        if isinstance(self.act, host_rollout.HostAct):
            try:
                self.act.close()
            except Exception as err:  # noqa: BLE001 - the failure that ended acting matters
                logging.warning("actor: closing the env copies failed (%s)", err)


class VersionGate:
    """On-policy freshness: act at most `chunks_per_version` chunks per params version.

    N actors then write N x chunks_per_version chunks per round, `step` = that many
    over the batch's K chunks updates' worth. After its chunks with version v, an
    actor waits (server-side, `ParamsClient.wait_for_version`) until the learner
    reaches v + step, so no chunk waits in the queue for older params to be used
    up: data age stays below `step`. Each round holds at least a batch (validated),
    so the learner always has what it needs to get there; a learner that still
    made no progress for `patience_s` (a lost chunk) lets the actor act anyway.
    Acting during a mere pause (the first update's compile) would leave a batch
    of older chunks queued for the rest of the run, so the patience is long.
    0 turns the gate off (fully asynchronous acting).
    """

    def __init__(
        self, params, config, items_per_batch: int, wait_s: float = 0.5, patience_s: float = 30.0
    ):
        self._params = params
        self._limit = config.actor.chunks_per_version
        per_round = config.num_actors * self._limit
        self._step = max(1, per_round // items_per_batch)
        self._wait_s, self._patience_s = wait_s, patience_s
        self.enabled = self._limit > 0
        self._version, self._chunks = None, 0

    def wait(self, should_stop) -> bool:
        """Call before each rollout; True when newer params were swapped in."""
        if not self.enabled:
            return False
        swapped = False
        if self._version == self._params.version and self._chunks >= self._limit:
            target, last, since = self._version + self._step, self._version, time.time()
            while not should_stop() and self._params.version < target:
                swapped |= self._params.wait_for_version(target, self._wait_s)
                if self._params.version != last:
                    last, since = self._params.version, time.time()
                elif time.time() - since > self._patience_s:
                    logging.warning("actor: learner stuck at version %d; acting anyway", last)
                    break
        if self._version != self._params.version:
            self._version, self._chunks = self._params.version, 0
        self._chunks += 1
        return swapped


class _MaxPriority:
    """Keeps the writer's priority for new items at the learner's largest priority.

    Asked for in the background once per rollout (a courier future), like params.
    """

    def __init__(self, learner):
        self._learner = learner
        self._future = None

    def refresh(self, writer) -> None:
        if self._future is not None and self._future.done():
            try:
                writer.priority = float(self._future.result())
            except Exception as err:  # noqa: BLE001 - a busy learner: keep the last value
                logging.info("actor: max priority not refreshed (%s)", err)
            self._future = None
        if self._future is None:
            self._future = self._learner.futures.max_priority()


class _Tally:
    """Counts accumulated locally and sent to the counter at most every 0.1 s; and the
    run's env steps as this actor knows them (`run_env_steps`)."""

    def __init__(self):
        self._pending = {}
        self._last = time.time()
        self._sent = 0  # this actor's env steps sent to the counter
        self._in_flight = collections.deque()  # (answer future, self._sent when sent)
        self._answered = (0, 0)  # (the run's env steps in the latest answer, self._sent then)

    def add(self, **deltas) -> None:
        for name, value in deltas.items():
            self._pending[name] = self._pending.get(name, 0) + value

    def run_env_steps(self) -> int:
        """The counter's latest answer, plus this actor's steps since: the other actors'
        since that answer are not known here."""
        while self._in_flight and self._in_flight[0][0].done():
            future, sent = self._in_flight.popleft()
            with contextlib.suppress(Exception):  # a restarting counter: the next answer
                self._answered = (future.result().get("env_steps", 0), sent)
        total, sent = self._answered
        return total + self._sent - sent + self._pending.get("env_steps", 0)

    def flush(self, counter, log: "_ActorLog") -> None:
        """Sends what is pending and waits for the counter (an actor that stops: a
        fire-and-forget call would die with its process)."""
        if self._pending:
            self._sent += self._pending.get("env_steps", 0)
            try:
                answer = counter.increment(**self._pending)
                self._in_flight.clear()  # this answer is later than theirs
                self._answered = (answer.get("env_steps", 0), self._sent)
            except Exception as err:  # noqa: BLE001 - a stopped counter: the counts are lost
                logging.info("actor: last counts not sent (%s)", err)
            log.add(**self._pending)
            self._pending = {}

    def maybe_report(self, counter, log: "_ActorLog") -> None:
        """Sends in the background, so reporting never blocks acting; `log` gets the same."""
        if self._pending and time.time() - self._last > _REPORT_SECONDS:
            self._sent += self._pending.get("env_steps", 0)
            future = counter.futures.increment(**self._pending)
            self._in_flight.append((future, self._sent))
            log.add(**self._pending)
            self._pending, self._last = {}, time.time()


class _ActorLog:
    """The actor's metric rows, from running totals of what `add` was given."""

    def __init__(self, logger: metrics.MetricsLogger, env_steps: int):
        self._log = logger
        self._totals = dict(
            env_steps=float(env_steps),
            episodes=0.0,
            successes=0.0,
            return_sum=0.0,
            actor_blocked_seconds=0.0,
            version_lag=0.0,
            param_updates=0.0,
        )
        self._deltas = metrics.Deltas(self._totals)
        self._lag = 0.0

    def add(self, **deltas) -> None:
        for name, value in deltas.items():
            self._totals[name] = self._totals.get(name, 0.0) + value

    def maybe_write(self, param_version: int, epsilon: float, reconnects: int) -> None:
        if not self._log.due():
            return
        d, seconds = self._deltas.step(self._totals)
        if d["param_updates"]:  # mean lag of the params that arrived since the last row
            self._lag = d["version_lag"] / d["param_updates"]
        episodes = max(d["episodes"], 1.0)
        self._log.write(
            int(self._totals["env_steps"]),
            dict(
                env_steps=self._totals["env_steps"],
                episodes=self._totals["episodes"],
                env_steps_per_s=d["env_steps"] / seconds,
                episodes_per_s=d["episodes"] / seconds,
                success_rate=d["successes"] / episodes,  # behaviour policy, this interval
                mean_return=d["return_sum"] / episodes,
                param_version=param_version,
                version_lag=self._lag,
                blocked_frac=d["actor_blocked_seconds"] / seconds,
                epsilon=epsilon,
                replay_reconnects=reconnects,  # the writer's, since the actor started
            ),
        )

    def close(self) -> None:
        self._log.close()
