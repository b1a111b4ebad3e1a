"""The on-policy pipeline (A2C, V-trace, PPO): rollout chunks through a queue.

An item is one actor's whole chunk, `Transition` [T, B]; the table is a bounded
`Table.queue` of `replay.queue_size` chunks, so actors block when the learner falls
behind, and sampling removes what it takes. A learner batch of M =
`learner.batch_chunks` items becomes `Transition` [T, M x B]. With
`actor.chunks_per_version` > 0 an actor acts at most that many chunks per params
version (`nodes.actor.VersionGate`), so the data is never older than a round. A
recurrent agent's item is a `types.CoreChunk`: the chunk and its core state at the
first step [1, B, ...], which the learner's batch and the trainer's split carry along
B like every other leaf.
"""

import jax
import jax.numpy as jnp
import numpy as np

from distrl import networks, packing, replay
from distrl.agents import PipelineKind
from distrl.agents.base import records_value
from distrl.errors import ConfigError, check
from distrl.pipelines.base import Pipeline, whole_batches, zeros
from distrl.types import CoreChunk, Transition, Versioned


class Chunks(Pipeline):
    kind = PipelineKind.CHUNKS
    carries_core_state = True  # a recurrent core's state travels with each chunk
    FIELDS = {
        "replay": dict(queue_size=4),  # chunks [T, B] buffered before actors block
        "learner": dict(batch_chunks=1),  # chunks [T, B] per update (T x B transitions each)
        "actor": dict(
            # chunks acted per params version before waiting for the next one (fresh
            # data); 0: act without waiting
            chunks_per_version=0,
        ),
    }

    def validate(self, config, agent_config, env) -> None:
        check(
            not config.learner.updates_in_flight,
            f"config.learner.updates_in_flight={config.learner.updates_in_flight}: only a "
            f"replay (DQN) learner may run ahead; an on-policy one finishes each update (a "
            f"gated actor waits for its version); need 0",
        )
        q, k = config.replay.queue_size, config.learner.batch_chunks
        check(q >= 1, f"config.replay.queue_size={q} chunks; need >= 1")
        check(k >= 1, f"config.learner.batch_chunks={k}; need >= 1")
        # Gated actors must produce a whole batch per version, or the learner waits forever.
        per_version = config.actor.chunks_per_version
        check(
            per_version == 0 or config.num_actors * per_version >= k,
            f"config.actor.chunks_per_version={per_version} x config.num_actors="
            f"{config.num_actors} chunks per version is less than one batch "
            f"(config.learner.batch_chunks={k}); need at least {k}, or 0",
        )
        minibatches = getattr(agent_config, "num_minibatches", None)  # PPO's
        steps = k * config.actor.unroll_length * config.actor.num_envs
        check(
            minibatches is None or minibatches <= steps,
            f"config.agent.num_minibatches={minibatches} exceeds the {steps} time steps "
            f"of a batch (batch_chunks x unroll_length x num_envs)",
        )
        sequences = k * config.actor.num_envs  # a recurrent minibatch is whole sequences
        check(
            minibatches is None or agent_config.core == "none" or minibatches <= sequences,
            f"config.agent.num_minibatches={minibatches} exceeds the {sequences} env "
            f"sequences of a batch (batch_chunks x num_envs), which a recurrent core "
            f"(config.agent.core={agent_config.core!r}) splits its minibatches from",
        )

    # -- items and their table
    def item_length(self, config, env) -> int:
        """Time steps in one item: T."""
        return config.actor.unroll_length

    def extras(self, num_envs: int, agent_config) -> dict:
        """The policy extras a chunk records, as zeros [B]: the sampled action's
        log-prob, and V(s) where the learner reads it (`records_value`)."""
        names = ("log_prob", "value") if records_value(agent_config) else ("log_prob",)
        return {name: np.zeros((num_envs,), np.float32) for name in names}

    def example_item(self, config, env) -> Versioned:
        b = config.actor.num_envs
        spec = env.spec
        obs = zeros((b, *spec.observation_shape), spec.observation_dtype)
        scalar = lambda dtype=np.float32: zeros((b,), dtype)  # noqa: E731
        step = Transition(
            observation=obs,
            action=zeros((b, *spec.action_shape), spec.action_dtype),
            reward=scalar(),
            discount=scalar(),
            last=scalar(np.bool_),
            next_observation=obs,
            extras=self.extras(b, config.agent),
        )
        t = self.item_length(config, env)
        chunk = jax.tree.map(lambda x: zeros((t,) + x.shape, x.dtype), step)
        agent = config.agent
        if agent.get("core", "none") != "none":
            state = networks.core_state(agent.core_size, agent.shared_torso, b)
            chunk = CoreChunk(chunk, tuple(zeros((1, *x.shape), np.float32) for x in state))
        return Versioned(chunk, zeros((), np.int32))

    def make_tables(self, config, env) -> list:
        signature = self.signature(config, env)
        return [replay.queue_table(config.replay.queue_size, signature)]

    def transitions_per_item(self, config) -> int:
        return config.actor.unroll_length * config.actor.num_envs

    def items_per_batch(self, config) -> int:
        return config.learner.batch_chunks

    # -- the actor
    def item_fn(self, agent_config, config, env):
        """The chunk itself, written as one item (no JAX: `packing.OnHost`)."""
        return packing.OnHost(lambda tail, chunk: (chunk, None))

    def write(self, writer, items, version: int) -> None:
        writer.write_chunk(items, version)

    # -- the learner
    def reading(self, config) -> replay.Reading:
        """Items one by one, none lost; in flight one batch unless
        `learner.max_in_flight` says: a sampled chunk leaves the queue at once, so
        every one in flight ages while it waits."""
        return whole_batches(self.items_per_batch(config), config, consumed=True)

    def learner_batch(self, data):
        """M items of [T, B] -> Transition [T, M x B] (a `CoreChunk`'s state [1, M x B])."""

        def to_time_major(x):  # [M, T, B, ...] -> [T, M * B, ...]
            x = np.swapaxes(x, 0, 1)
            return x.reshape(x.shape[:1] + (-1,) + x.shape[3:])

        return jax.tree.map(to_time_major, data)

    def batch_rows(self, config) -> int:
        return config.learner.batch_chunks * config.actor.unroll_length * config.actor.num_envs

    def stored(self, config, env, local: bool) -> tuple:
        a, size = config.actor, config.replay.queue_size
        steps, item = self.item_length(config, env), self.item_bytes(config, env)
        return (
            size * item,
            f"replay.queue_size={size} chunks of {steps} x {a.num_envs} steps x "
            f"{item // (steps * a.num_envs)} B",
        )

    # -- the single-process trainer
    def local_updates(self, config) -> int:
        """num_actors / batch_chunks: the rollout of every actor's envs split into the
        distributed learner's batches."""
        chunks = config.learner.batch_chunks
        if config.num_actors % chunks:
            raise ConfigError(
                f"config.num_actors={config.num_actors} must be a multiple of "
                f"config.learner.batch_chunks={chunks} for the single-process trainer "
                f"(it splits num_actors x num_envs envs into updates of "
                f"batch_chunks x num_envs)"
            )
        return config.num_actors // chunks

    def local_init(self, env, agent, cfg, state, rollout_carry, key) -> tuple:
        return rollout_carry, None, 0

    def local_learn(self, agent, cfg, state, data, chunk, key) -> tuple:
        """chunk [T, B] split along B into `updates_per_iteration` batches
        [T, B / updates_per_iteration] (the distributed learner's batch), one update each."""
        k = cfg.updates_per_iteration
        groups = jax.tree.map(
            lambda x: jnp.moveaxis(x.reshape((x.shape[0], k, -1) + x.shape[2:]), 1, 0), chunk
        )  # [k, T, B / k, ...]
        state, _ = jax.lax.scan(lambda s, batch: (agent.update(s, batch)[0], None), state, groups)
        return state, data

    def describe(self, config) -> str:
        return f"queue (size {config.replay.queue_size})"

    def describe_batch(self, config) -> str:
        return f"{config.learner.batch_chunks} chunks"
