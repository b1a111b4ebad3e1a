"""The sequence pipeline (R2D2): overlapping sequences of one env with a recurrent
core's state at their first step, sampled from a replay table.

A sequence starts at every rollout chunk's first step, so the period between starts
is `actor.unroll_length` (P): the actor's rollout knows the core's state there (the
chunk's `types.CoreChunk`). A sequence holds the L = `replay.sequence_length` steps
from its start (the W = ceil(L / P) chunks from there; L > P overlaps its successor
by L - P steps, R2D2's L / 2 at L = 2P), so the item function carries the last
W - 1 chunks and writes, per chunk, one item per env: `CoreChunk(Transition [L],
state [1, H])`. The table is the transitions pipeline's (`replay_table`: uniform or
prioritized, FIFO, `replay.samples_per_insert`), its sizes in transitions as DQN's,
an item adding P of them; a sampled sequence counts as one item, so the ratio is
sequences sampled per sequence inserted. A learner batch of N =
`learner.batch_sequences` items is the time-major `CoreChunk` [L, N] (state
[1, N, H]) that R2D2's loss unrolls (`agents.r2d2`); each sequence's priority is the
agent's mix of its TD errors.
"""

import jax
import jax.numpy as jnp
import numpy as np

from distrl import networks, replay
from distrl.acting import rollout
from distrl.agents import PipelineKind, r2d2
from distrl.agents.replay_buffer import replay_add, replay_init, replay_sample
from distrl.errors import check
from distrl.pipelines import replay_table
from distrl.pipelines.base import Pipeline, whole_batches, zeros
from distrl.types import CoreChunk, Transition, Versioned


class Sequences(Pipeline):
    kind = PipelineKind.SEQUENCES
    carries_core_state = True  # each item holds the core's state at its first step
    unroll_length = 16  # P: a sequence starts every P steps
    FIELDS = {
        # L: env steps per stored sequence (burn-in included); at least
        # agent.burn_in + agent.n_step, and at least actor.unroll_length (the period)
        "replay": dict(sequence_length=32),
        "learner": dict(batch_sequences=32),  # sequences of L steps per update
    }

    def validate(self, config, agent_config, env) -> None:
        length, period = config.replay.sequence_length, config.actor.unroll_length
        burn_in, n = agent_config.burn_in, agent_config.n_step
        check(
            r2d2.learned_steps(length, burn_in, n) >= 1,
            f"config.replay.sequence_length={length} is shorter than config.agent.burn_in="
            f"{burn_in} + config.agent.n_step={n}; need at least {burn_in + n} (a step's "
            f"loss needs its n steps after the burn-in)",
        )
        check(
            length >= period,
            f"config.replay.sequence_length={length} is shorter than config.actor."
            f"unroll_length={period}, the period between sequence starts (steps between "
            f"sequences would never be learned); need at least {period}",
        )
        batch = config.learner.batch_sequences
        check(batch >= 1, f"config.learner.batch_sequences={batch}; need >= 1")
        check(
            not config.learner.updates_in_flight,
            f"config.learner.updates_in_flight={config.learner.updates_in_flight}: only "
            f"DQN's learner runs ahead; need 0",
        )
        what = (
            f"a multiple of config.actor.unroll_length = {period} (a sequence item adds "
            f"{period} new steps of one env)"
        )
        names = ("unroll_length", "learner.batch_sequences x unroll_length")
        replay_table.validate(config, period, batch * period, what, names)

    # -- items and their table
    def example_item(self, config, env) -> Versioned:
        length, spec = config.replay.sequence_length, env.spec
        obs = zeros((length, *spec.observation_shape), spec.observation_dtype)
        scalar = lambda dtype=np.float32: zeros((length,), dtype)  # noqa: E731
        steps = Transition(
            obs, zeros((length, *spec.action_shape), spec.action_dtype), scalar(), scalar(),
            scalar(np.bool_), obs, {},
        )  # fmt: skip
        state = networks.core_state(config.agent.core_size, True, 1)
        item = CoreChunk(steps, tuple(zeros(x.shape, np.float32) for x in state))
        return Versioned(item, zeros((), np.int32))

    def make_tables(self, config, env) -> list:
        signature = self.signature(config, env)
        period = config.actor.unroll_length
        return [replay_table.make(config, signature, period, self.items_per_batch(config))]

    def transitions_per_item(self, config) -> int:
        return config.actor.unroll_length  # the new steps of one env each sequence adds

    def items_per_batch(self, config) -> int:
        return config.learner.batch_sequences

    def weights_per_item(self, config) -> int:
        return 1  # the loss weighs whole sequences

    # -- the actor
    def item_fn(self, agent_config, config, env):
        """(tail, chunk `CoreChunk` [P, B]) -> (B sequences, tail): the tail is the last
        up to W - 1 chunks (a tuple, so that each length is its own structure: the
        actor's packed output is laid out per structure); none are written before W
        chunks have been seen."""
        length, period = config.replay.sequence_length, config.actor.unroll_length
        spanned = -(-length // period)

        def items(tail, chunk):
            chunks = (tail or ()) + (chunk,)
            if len(chunks) < spanned:
                empty = sequences((chunk,) * spanned, length)
                return jax.tree.map(lambda x: x[:0], empty), chunks
            return sequences(chunks, length), chunks[1:]

        return items

    def write(self, writer, items, version: int) -> None:
        if jax.tree.leaves(items)[0].shape[0]:  # none while the first sequences fill
            writer.write_steps(items, version)  # one item per env's sequence

    def prioritized(self, config) -> bool:
        return config.replay.sampler == "prioritized"

    # -- the learner
    def reading(self, config) -> replay.Reading:
        """Whole batches, one per read (an update unrolls N x L steps twice, so a read's
        cost is small beside it); one batch in flight unless `learner.max_in_flight` says."""
        return whole_batches(self.items_per_batch(config), config, consumed=False)

    def learner_batch(self, data):
        """N items of [L] (state [1, H]) -> the time-major `CoreChunk` [L, N] ([1, N, H])."""
        return jax.tree.map(lambda x: np.swapaxes(x, 0, 1), data)

    def batch_rows(self, config) -> int:
        return config.learner.batch_sequences * config.replay.sequence_length

    def stored(self, config, env, local: bool) -> tuple:
        items = replay_table.items(config, config.actor.unroll_length)[0]
        size, length = self.item_bytes(config, env), config.replay.sequence_length
        # the single-process trainer's buffer is a JAX array updated functionally: twice
        return (
            items * size * (2 if local else 1),
            f"replay.max_size={config.replay.max_size} transitions: {items} sequences of "
            f"{length} steps x {size // length} B",
        )

    # -- the single-process trainer
    def local_updates(self, config) -> int:
        """samples_per_insert x the sequences an iteration adds (one per env) /
        batch_sequences (at least 1): the ratio Reverb's rate limiter keeps."""
        envs = config.num_actors * config.actor.num_envs
        ratio = config.replay.samples_per_insert * envs
        return max(1, round(ratio / config.learner.batch_sequences))

    def local_batch(self, config) -> int:
        return config.learner.batch_sequences

    def local_warm_up(self, agent_config) -> str:
        del agent_config
        return "the chunks before the first whole sequence"

    def local_init(self, env, agent, cfg, state, rollout_carry, key) -> tuple:
        """A buffer of replay.max_size / P sequences, and the W - 1 chunks acted first
        (the tail after which every chunk completes B sequences)."""
        period, length = cfg.rollout_length, cfg.sequence_length
        tail = []
        for k in jax.random.split(key, -(-length // period) - 1):
            rollout_carry, chunk, _ = rollout.unroll(
                env, rollout.policy_of(agent), period, state.params, rollout_carry, k,
                agent.epsilon(0),
            )  # fmt: skip
            tail.append(chunk)
        spec = env.spec
        obs = jnp.zeros((length, *spec.observation_shape), spec.observation_dtype)
        scalar = jnp.zeros((length,), jnp.float32)
        steps = Transition(
            obs, jnp.zeros((length, *spec.action_shape), spec.action_dtype), scalar, scalar,
            jnp.zeros((length,), bool), obs, {},
        )  # fmt: skip
        example = CoreChunk(steps, agent.core.initial_state(1))
        buffer = replay_init(example, cfg.replay_capacity // period)
        return rollout_carry, (buffer, tuple(tail)), len(tail) * period * cfg.num_envs

    def local_learn(self, agent, cfg, state, data, chunk, key) -> tuple:
        """The chunk's B sequences into the buffer, then `local_updates` updates on
        uniform samples once it holds `replay.min_size` / P of them."""
        buffer, tail = data
        chunks = tail + (chunk,)
        buffer = replay_add(buffer, sequences(chunks, cfg.sequence_length))
        ready = buffer.size >= cfg.min_replay_size // cfg.rollout_length

        def one(s, k):
            batch = jax.tree.map(
                lambda x: jnp.swapaxes(x, 0, 1), replay_sample(buffer, k, cfg.batch_size)
            )  # [L, N]
            return jax.lax.cond(
                ready, lambda s_: agent.update(s_, batch)[0], lambda s_: s_, s
            ), None

        state, _ = jax.lax.scan(one, state, jax.random.split(key, cfg.updates_per_iteration))
        return state, (buffer, chunks[1:])

    def describe(self, config) -> str:
        return (
            f"replay table of {config.replay.sequence_length}-step sequences "
            f"(samples/insert {config.replay.samples_per_insert:g})"
        )

    def describe_batch(self, config) -> str:
        return f"{config.learner.batch_sequences} sequences"


def sequences(chunks: tuple, length: int) -> CoreChunk:
    """B sequences [B, L] from consecutive chunks `CoreChunk` [P, B] that span L steps:
    the first L steps of their concatenation, and the first chunk's state [B, 1, H]."""
    steps = jax.tree.map(lambda *xs: jnp.concatenate(xs, axis=0), *[c.chunk for c in chunks])
    steps = jax.tree.map(lambda x: jnp.swapaxes(x[:length], 0, 1), steps)
    return CoreChunk(steps, jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), chunks[0].core_state))
