"""Stage 6 of the data flow: the learner node, from Reverb batches to new params.

Pulls batches through Reverb's prefetching dataset, reshapes them into the agent's
batch (`replay.to_learner_batch`), moves them to the accelerator, applies the
jitted update, and serves `(version, params)` to actors and the evaluator. The
version is the number of updates applied. Params are copied to the host only when
someone asks for them, so serving costs the update loop nothing.
"""

import threading
import time

import jax
import jax.numpy as jnp
import numpy as np
from absl import logging

from distrl import agents, lifecycle, replay
from distrl import config as config_lib
from distrl.agents import dqn

_REPORT_SECONDS = 0.5


def make_priority_fn(agent):
    """Jitted `(state, batch [K*B], K) -> item priorities [K]`: max |TD| over each item.

    An item holds the B transitions of one time step, so its priority is the
    largest TD error among them (floored so that no item becomes unsampleable).
    """
    td = jax.vmap(dqn.td_error, in_axes=(None, None, None, 0, None))

    def priorities(state, batch, items: int):
        errors = td(agent.network, state.params, state.target_params, batch,
                    agent.config.double_q)  # [K * B]
        return jnp.maximum(jnp.max(jnp.abs(errors.reshape(items, -1)), axis=1), 1e-6)

    return jax.jit(priorities, static_argnums=2)


def num_transitions(batch) -> int:
    """Transitions in a learner batch: N for QTransition [N], T * N for [T, N]."""
    leaf = batch.action
    return int(np.prod(leaf.shape))


class Learner:
    """Courier node: `run()` trains until the program stops; `get_params()` serves."""

    def __init__(self, config, replay_client, counter, run_dir: str):
        self._config = config
        self._run_dir = run_dir
        self._replay = replay_client
        self._counter = counter
        self._lock = threading.Lock()
        self._state = None
        self._version = 0

    def get_params(self):
        """(version, params as numpy pytree); version -1 before the first init."""
        with self._lock:
            state, version = self._state, self._version
        if state is None:
            return -1, None
        return version, jax.device_get(state.params)

    def run(self) -> None:
        with lifecycle.guard("learner", self._run_dir):
            self._run()

    def _run(self) -> None:
        should_stop = lifecycle.should_stop
        c = self._config
        env = config_lib.make_env(c)
        agent_config = config_lib.make_agent_config(c)
        agent = agents.make_agent(agent_config, env)
        is_replay = config_lib.is_replay(agent_config)
        prioritized = is_replay and c.replay.sampler == "prioritized"
        priorities = make_priority_fn(agent) if prioritized else None
        with self._lock:
            self._state = agent.init(jax.random.PRNGKey(c.seed))
        if not replay.wait_for_server(self._replay, should_stop):
            return
        server = self._replay.server_address
        report = _Report()
        batches = replay.iterate_batches(server, c, env.obs_size, should_stop)
        for sample, waited in batches:
            start = time.perf_counter()
            batch = jax.device_put(replay.to_learner_batch(sample.data, is_replay))
            state, metrics = agent.update(self._state, batch)
            if priorities is not None:
                self._update_priorities(priorities, state, batch, sample.info.key)
            with self._lock:
                self._state, self._version = state, self._version + 1
            report.add(metrics, waited, time.perf_counter() - start, batch)
            report.maybe_send(self._counter, self._version)
        logging.info("learner: stopped after %d updates", self._version)

    def _update_priorities(self, priorities, state, batch, keys) -> None:
        prios = np.asarray(priorities(state, batch, len(keys)), np.float64)
        self._replay.mutate_priorities(
            replay.TABLE, updates=dict(zip(np.asarray(keys).tolist(), prios.tolist()))
        )


class _Report:
    """Learner counts and the latest metrics, sent to the counter every 0.5 s."""

    def __init__(self):
        self._updates = 0
        self._samples = 0
        self._wait = 0.0
        self._busy = 0.0
        self._metrics = {}
        self._last = time.time()

    def add(self, metrics, waited: float, busy: float, batch) -> None:
        self._updates += 1
        self._samples += num_transitions(batch)
        self._wait += waited
        self._busy += busy
        self._metrics = metrics

    def maybe_send(self, counter, version: int) -> None:
        """Sends in the background, so reporting never blocks learning."""
        if not self._updates or time.time() - self._last <= _REPORT_SECONDS:
            return
        latest = {f"learner_{k}": float(v) for k, v in jax.device_get(self._metrics).items()}
        counts = dict(
            learner_steps=self._updates, learner_samples=self._samples,
            learner_wait_seconds=self._wait, learner_busy_seconds=self._busy,
        )
        counter.futures.increment(**counts)
        counter.futures.set(param_version=version, **latest)
        self._updates = self._samples = 0
        self._wait = self._busy = 0.0
        self._last = time.time()
