"""Stage 6 of the data flow: the actor node, from params to Reverb items.

Each actor steps B envs with the jitted, vmapped rollout (T steps per call) using
the latest params it has, turns the chunk into items for its pipeline (n-step
`QTransition`s per time step for replay, the whole `Transition` [T, B] chunk for the
queue), writes them, and reports env steps and episodes to the counter. Params
arrive in the background (`ParamsClient`), so stepping never waits on the learner
after the first pull.
"""

import time

import jax
from absl import logging

from distrl import agents, lifecycle, replay, rollout
from distrl import config as config_lib
from distrl.agents import nstep
from distrl.variables import ParamsClient

_REPORT_SECONDS = 0.5


def actor_epsilon(base_epsilon: float, actor_id: int, num_actors: int, spread: float) -> float:
    """Ape-X style per-actor exploration: eps ** (1 + spread * i / (N - 1))."""
    if spread <= 0 or num_actors == 1:
        return base_epsilon
    return float(base_epsilon ** (1.0 + spread * actor_id / (num_actors - 1)))


def make_item_fn(agent_config):
    """Jitted `(tail, chunk) -> (items, tail)`: what one rollout chunk writes.

    Replay: n-step transitions [T, B] (the first chunk, without a tail, gives
    T - n + 1); the last n - 1 steps carry over so every step is emitted once.
    Queue: the chunk itself, written as one item.
    """
    if not config_lib.is_replay(agent_config):
        return lambda tail, chunk: (chunk, None)
    n, gamma = agent_config.n_step, agent_config.discount

    @jax.jit
    def items(tail, chunk):
        full = chunk if tail is None else nstep.concat_tail(tail, chunk)
        return nstep.n_step_transitions(full, n, gamma), nstep.tail(chunk, n)

    return items


class Actor:
    """Courier node: `run()` acts until the program stops."""

    def __init__(self, config, actor_id: int, replay_client, learner, counter, run_dir: str):
        self._config = config
        self._run_dir = run_dir
        self._id = actor_id
        self._replay = replay_client
        self._learner = learner
        self._counter = counter

    def run(self) -> None:
        with lifecycle.guard(f"actor/{self._id}", self._run_dir):
            self._run()

    def _run(self) -> None:
        should_stop = lifecycle.should_stop
        c = self._config
        env = config_lib.make_env(c)
        agent_config = config_lib.make_agent_config(c)
        agent = agents.make_agent(agent_config, env)
        unroll = rollout.make_rollout(env, agent.policy, c.actor.unroll_length)
        to_items = make_item_fn(agent_config)
        params = ParamsClient(self._learner, c.actor.params_update_period)
        if not replay.wait_for_server(self._replay, should_stop):
            return
        if not params.wait_first(should_stop):
            return
        key = jax.random.fold_in(jax.random.PRNGKey(c.seed), 1000 + self._id)
        key, carry_key = jax.random.split(key)
        carry = rollout.init_carry(env, carry_key, c.actor.num_envs)
        writer = replay.Writer(self._replay, should_stop)
        write = writer.write_steps if config_lib.is_replay(agent_config) else writer.write_chunk
        tally = _Tally()
        tail, env_steps = None, 0
        try:
            while not should_stop():
                if params.update():
                    tally.add(version_lag=params.last_lag, param_updates=1)
                global_steps = env_steps * c.num_actors  # the schedule counts all actors
                epsilon = actor_epsilon(
                    float(agent.epsilon(global_steps)), self._id, c.num_actors,
                    c.actor.epsilon_spread,
                )
                key, step_key = jax.random.split(key)
                carry, chunk, stats = unroll(params.params, carry, step_key, epsilon)
                items, tail = to_items(tail, chunk)
                write(jax.device_get(items))
                env_steps += int(stats.env_steps)
                tally.add(
                    env_steps=int(stats.env_steps), episodes=int(stats.episodes),
                    successes=int(stats.successes), return_sum=float(stats.return_sum),
                    actor_blocked_seconds=writer.blocked_seconds,
                )
                writer.blocked_seconds = 0.0
                tally.maybe_report(self._counter)
        finally:
            writer.close()
        logging.info("actor %d: stopped after %d env steps", self._id, env_steps)


class _Tally:
    """Counts accumulated locally and sent to the counter at most every 0.5 s."""

    def __init__(self):
        self._pending = {}
        self._last = time.time()

    def add(self, **deltas) -> None:
        for name, value in deltas.items():
            self._pending[name] = self._pending.get(name, 0) + value

    def maybe_report(self, counter) -> None:
        """Sends in the background, so reporting never blocks acting."""
        if self._pending and time.time() - self._last > _REPORT_SECONDS:
            counter.futures.increment(**self._pending)
            self._pending, self._last = {}, time.time()

