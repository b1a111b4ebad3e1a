"""Ceilings: each pipeline stage's work alone, in one process, measured first.

- rollout: `rollout.make_rollout` at the actor's [T, B], params fixed, no I/O;
- actor compute: the same plus the actor's item function and the copy to the host
  (everything an actor does per chunk except Reverb and the params RPC);
- update: the agent's jitted update on device-resident batches of the learner's
  shape (DQN QTransition [N], PPO Transition [T, M*B]), via `benchmarks.learner`;
- Reverb insert: the real `replay.Writer` writing the real items of a rollout
  (DQN: T/k items of [k, B] per call, k = replay.item_steps; PPO: one [T, B]
  chunk) to a server in a child process; Reverb read: the learner's
  `replay.iterate_batches` on that table once filled, plus `replay.to_learner_batch`.
Every figure is in env steps (= transitions) per second, plus calls per second.
"""

import jax
import reverb

from benchmarks import learner as learner_bench
from benchmarks import tables
from benchmarks.common import measure_rate, measure_rates
from distrl import agents, replay, rollout
from distrl import config as config_lib
from distrl.nodes.actor import _split_key, make_act, make_item_fn

_EPSILON = 0.1  # a mid-training exploration rate; it changes no shapes


class ActorWork:
    """An actor's pure parts for `config`, compiled once: rollout, item function, params."""

    def __init__(self, config):
        self.config = config
        env = config_lib.make_env(config)
        agent = agents.make_agent(config_lib.make_agent_config(config), env)
        self.params = agent.init(jax.random.PRNGKey(config.seed)).params
        self.unroll = rollout.make_rollout(env, agent.policy, config.actor.unroll_length)
        self.act = make_act(
            self.unroll,
            make_item_fn(
                config_lib.make_agent_config(config),
                config_lib.episode_window(config),
                config_lib.item_steps(config),
            ),
        )
        self.carry = rollout.init_carry(env, jax.random.PRNGKey(1), config.actor.num_envs)
        self.key, self.tail = jax.random.PRNGKey(2), None
        self._pending = None  # the last call's packed output, copied by the next call

    def chunk(self):
        """One rollout call: (Transition [T, B] on device, RolloutStats)."""
        self.key, key = _split_key(self.key)  # as the actor does
        self.carry, chunk, stats = self.unroll(self.params, self.carry, key, _EPSILON)
        return chunk, stats

    def items(self):
        """One rollout call's host items, as the actor gets them (its `make_act`: items
        and statistics leave the device as one buffer), and as it pipelines them: the
        next rollout is dispatched before the previous one is copied and unpacked, so
        XLA computes while the host copies (the rollout ceiling's calls overlap too).
        The first call returns its own items."""
        self.key, key = _split_key(self.key)
        (self.carry, self.tail), output = self.act(
            self.params, self.carry, key, _EPSILON, self.tail
        )
        previous, self._pending = self._pending, output
        items, _ = self.act.unpack(output if previous is None else previous)
        return items


def rollout_and_actor_compute(work: ActorWork, seconds: float) -> tuple[dict, dict]:
    """Env steps/s of the jitted rollout alone at the actor's [T, B], and of rollout +
    items + the copy to the host (an actor without Reverb), in alternating slices
    (`seconds` each)."""
    rates = measure_rates(
        {
            "rollout": (lambda: work.chunk()[1], jax.block_until_ready),
            "actor_compute": (work.items, lambda out: out),
        },
        seconds,
    )
    return _steps(work.config, rates["rollout"]), _steps(work.config, rates["actor_compute"])


def update_ceiling(config, seconds: float) -> dict:
    """Updates/s and samples/s of the jitted update at the learner's batch shape."""
    obs_size = config_lib.make_env(config).obs_size
    agent_config = config_lib.make_agent_config(config)
    device = jax.devices()[0]
    if agent_config.pipeline is agents.Pipeline.REPLAY:
        out = learner_bench.dqn_update_rate(
            obs_size, config.learner.batch_size, device, seconds, agent_config
        )
        return dict(out, batch=f"[{config.learner.batch_size}]")
    t, n = config.actor.unroll_length, config.learner.batch_chunks * config.actor.num_envs
    out = learner_bench.ppo_update_rate(obs_size, t, n, device, seconds, agent_config)
    return dict(out, batch=f"[{t}, {n}]")


def reverb_ceilings(work: ActorWork, address: str, seconds: float) -> dict:
    """Insert and read ceilings against the (empty, unlimited) table at `address`."""
    config = work.config
    obs_size = config_lib.make_env(config).obs_size
    pipeline = config_lib.pipeline(config)
    is_replay = pipeline is agents.Pipeline.REPLAY
    chunks = [work.items() for _ in range(5)][1:]  # a DQN first chunk is short if n > 1
    client = reverb.Client(address)
    writer = replay.Writer(client, lambda: False)
    state = {"i": 0}

    def insert():
        writer.write(pipeline, chunks[state["i"] % len(chunks)])
        state["i"] += 1

    insert_calls = measure_rate(insert, seconds)
    writer.close()
    fill = tables.table_counts(client)
    batches = replay.iterate_batches(address, config, obs_size, lambda: False)  # the learner's
    read_batches = measure_rate(
        lambda: replay.to_learner_batch(next(batches)[0].data, pipeline), seconds
    )
    t, b = config.actor.unroll_length, config.actor.num_envs
    items_per_call = t // config_lib.item_steps(config) if is_replay else 1
    batch_transitions = (
        config.learner.batch_size if is_replay else config.learner.batch_chunks * t * b
    )
    return {
        "insert_calls_per_s": insert_calls,
        "insert_items_per_s": insert_calls * items_per_call,
        "insert_steps_per_s": insert_calls * t * b,
        "read_batches_per_s": read_batches,
        "read_samples_per_s": read_batches * batch_transitions,
        "table_items": fill["size"],
    }


def _steps(config, calls_per_s: float) -> dict:
    """A rollout call rate as env steps/s at the config's [T, B]."""
    t, b = config.actor.unroll_length, config.actor.num_envs
    return {"calls_per_s": calls_per_s, "steps_per_s": calls_per_s * t * b, "shape": f"[{t}, {b}]"}


def measure_all(configs, seconds: float) -> dict:
    """Every ceiling of each config ({name: config}) -> {name: {'rollout',
    'actor_compute', 'update', 'reverb'}}; one Reverb server process serves all."""
    specs = {name: (c, config_lib.make_env(c).obs_size) for name, c in configs.items()}
    out = {}
    with tables.server_process(specs) as addresses:
        for name, config in configs.items():
            work = ActorWork(config)
            rollout_rate, actor_rate = rollout_and_actor_compute(work, seconds)
            out[name] = {
                "rollout": rollout_rate,
                "actor_compute": actor_rate,
                "update": update_ceiling(config, seconds),
                "reverb": reverb_ceilings(work, addresses[name], seconds),
            }
    return out
