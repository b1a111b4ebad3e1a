"""The replay pipeline (DQN, tabular Q): n-step transitions sampled from a replay table.

An item holds the n-step `QTransition`s of k = `replay.item_steps` consecutive time
steps of one actor's B envs, [k, B] ([B] at k = 1, the layout of runs saved before
the field, so their replay checkpoints still fit). The table samples items
uniformly or by priority, removes the oldest first and keeps `replay.samples_per_insert`
with a `SampleToInsertRatio` rate limiter. A learner batch of N transitions is
N / (k x B) items, read 8 batches at a time. Sizes in the config count transitions
(one env step of one env), so they are multiples of k x B; Reverb's own sizes count
items (`replay_items`, `error_buffer`).
"""

import jax
import jax.numpy as jnp
import numpy as np

from distrl import replay
from distrl.acting import rollout
from distrl.agents import PipelineKind, nstep
from distrl.agents.replay_buffer import replay_add, replay_init, replay_sample
from distrl.errors import check
from distrl.pipelines import replay_table
from distrl.pipelines.base import Pipeline, zeros
from distrl.types import QTransition, Versioned

# replay.item_steps's default: Reverb's cost is per item, and 2 time steps per item
# write more per second with learning per env step unchanged, where 4 needed more env
# steps (docs/decisions.md, "A DQN item is k time steps of one actor's B envs"). A run
# saved before the field has k = 1 (`config.upgrade`).
ITEM_STEPS = 2


class Transitions(Pipeline):
    kind = PipelineKind.REPLAY
    FIELDS = {
        "replay": dict(
            # k, consecutive time steps of one actor's B envs per Reverb item (an item
            # holds QTransition [k, B], k x B transitions); the unroll length is a
            # multiple of k, the sizes below and learner.batch_size of k x B
            item_steps=ITEM_STEPS,
            max_size=64_000,  # transitions kept (FIFO); a multiple of k x actor.num_envs
            min_size=640,  # transitions before the learner may sample; a multiple of k x B
            samples_per_insert=4.0,  # transitions sampled per transition inserted (ratio)
            error_buffer=0.0,  # rate limiter slack, in transitions; 0: derived
            sampler="uniform",  # "uniform" | "prioritized"
            priority_exponent=0.6,  # prioritized: alpha, P(i) ~ priority_i ** alpha
            importance_exponent=0.4,  # prioritized: beta at the first update
            importance_anneal_updates=5_000,  # updates over which beta rises to 1 (0: fixed)
        ),
        "learner": dict(
            batch_size=256,  # transitions per update; a multiple of k x actor.num_envs
            # batches taken per dataset read, then cut into views: a read costs about
            # the same whatever it holds (docs/decisions.md, "DQN reads 8 batches per
            # dataset read")
            batches_per_read=8,
            # updates dispatched before the oldest is waited for (its params are served
            # once finished); 0: wait for each. 1 is opt-in: faster alone, but it took
            # more env steps (docs/decisions.md, "DQN reads 8 batches per dataset read")
            updates_in_flight=0,
        ),
    }

    def validate(self, config, agent_config, env) -> None:
        b, n = config.learner.batch_size, config.actor.num_envs
        k, t = config.replay.item_steps, config.actor.unroll_length
        check(
            t % k == 0,
            f"config.replay.item_steps={k} does not divide config.actor.unroll_length={t}; "
            f"need a divisor of it (a rollout of {t} steps writes whole items of {k} steps)",
        )
        per_item = k * n
        what = (
            f"a multiple of config.replay.item_steps x config.actor.num_envs = {k} x {n} = "
            f"{per_item} (a replay item holds {per_item} transitions: {k} time "
            f"step{'s' * (k > 1)} of {n} envs)"
        )
        check(
            b >= per_item and b % per_item == 0,
            f"config.learner.batch_size={b} transitions; need {what}",
        )
        names = ("item_steps x num_envs", "batch_size")
        replay_table.validate(config, per_item, b, what, names)
        check(
            agent_config.n_step <= config.actor.unroll_length,
            f"config.agent.n_step={agent_config.n_step} exceeds "
            f"config.actor.unroll_length={config.actor.unroll_length}",
        )

    # -- items and their table
    def example_item(self, config, env) -> Versioned:
        lead = item_shape(config)
        spec = env.spec
        obs = zeros(lead + tuple(spec.observation_shape), spec.observation_dtype)
        action = zeros(lead + spec.action_shape, spec.action_dtype)
        scalar = zeros(lead, np.float32)
        return Versioned(QTransition(obs, action, scalar, scalar, obs), zeros((), np.int32))

    def make_tables(self, config, env) -> list:
        per_item = self.transitions_per_item(config)
        signature = self.signature(config, env)
        return [replay_table.make(config, signature, per_item, self.items_per_batch(config))]

    def transitions_per_item(self, config) -> int:
        return config.replay.item_steps * config.actor.num_envs

    def items_per_batch(self, config) -> int:
        return config.learner.batch_size // self.transitions_per_item(config)

    # -- the actor
    def item_fn(self, agent_config, config, env):
        """n-step rows grouped into items of k consecutive time steps, [rows / k, k, B]
        ([rows, B] at k = 1), each step emitted exactly once across chunks and no step
        left on the host (`replay_rows`)."""
        n, gamma, k = agent_config.n_step, agent_config.discount, config.replay.item_steps

        @jax.jit
        def items(tail, chunk):
            rows, tail = replay_rows(tail, chunk, n, gamma, k)
            if k > 1:
                rows = jax.tree.map(lambda x: x.reshape((-1, k) + x.shape[1:]), rows)
            return rows, tail

        return items

    def write(self, writer, items, version: int) -> None:
        writer.write_steps(items, version)  # one item per k time steps

    def prioritized(self, config) -> bool:
        return config.replay.sampler == "prioritized"

    # -- the learner
    def reading(self, config) -> replay.Reading:
        """Whole batches, `learner.batches_per_read` per read; in flight: max(64 time
        steps of B envs, i.e. 64 / k items, 4 batches) unless `learner.max_in_flight`
        says: samples taken further ahead add their wait to the data age."""
        per_batch = self.items_per_batch(config)
        derived = max(-(-64 // config.replay.item_steps), 4 * per_batch)
        return replay.Reading(
            items_per_batch=per_batch,
            batches_per_read=config.learner.batches_per_read,
            in_flight=config.learner.max_in_flight or derived,
            prefetch=config.learner.prefetch,
            consumed=False,
        )

    def learner_batch(self, data):
        """K items of [k, B] (or [B] at k = 1) -> QTransition [K x k x B], each item's
        transitions consecutive (`replay.transition_weights` relies on it)."""
        lead = np.ndim(data.reward)  # [K, k, B] or [K, B]: the dims that become N
        return jax.tree.map(lambda x: x.reshape((-1,) + x.shape[lead:]), data)

    def batch_rows(self, config) -> int:
        return config.learner.batch_size

    def stored(self, config, env, local: bool) -> tuple:
        size = config.replay.max_size
        per_transition = self.item_bytes(config, env) // self.transitions_per_item(config)
        # the single-process trainer's buffer is a JAX array updated functionally: twice
        return (
            size * per_transition * (2 if local else 1),
            f"replay.max_size={size} transitions x {per_transition} B",
        )

    # -- the single-process trainer
    def local_updates(self, config) -> int:
        """samples_per_insert x T x B / batch_size (at least 1): the ratio Reverb's
        rate limiter keeps in the distributed run."""
        envs = config.num_actors * config.actor.num_envs
        ratio = config.replay.samples_per_insert * config.actor.unroll_length * envs
        return max(1, round(ratio / config.learner.batch_size))

    def local_init(self, env, agent, cfg, state, rollout_carry, key) -> tuple:
        """A replay buffer of `replay.max_size` transitions, and for n > 1 the n - 1
        warm-up steps after which every step starts one window (the n-step tail)."""
        n, tail, env_steps = agent.config.n_step, None, 0
        if n > 1:
            rollout_carry, tail, _ = rollout.unroll(
                env, agent.policy, n - 1, state.params, rollout_carry, key, agent.epsilon(0)
            )
            env_steps = (n - 1) * cfg.num_envs
        spec = env.spec
        obs0 = jnp.zeros(spec.observation_shape, spec.observation_dtype)
        action0 = jnp.zeros(spec.action_shape, spec.action_dtype)
        example = QTransition(obs0, action0, jnp.float32(0), jnp.float32(0), obs0)
        return rollout_carry, (replay_init(example, cfg.replay_capacity), tail), env_steps

    def local_warm_up(self, agent_config) -> str:
        n = agent_config.n_step
        return f"the {n - 1} steps before agent.n_step={n}'s first window" if n > 1 else ""

    def local_learn(self, agent, cfg, state, data, chunk, key) -> tuple:
        """The chunk's n-step transitions into the buffer, then `local_updates` updates
        on uniform samples once it holds `replay.min_size`."""
        buffer, tail = data
        n, gamma = agent.config.n_step, agent.config.discount
        full = chunk if tail is None else nstep.concat_tail(tail, chunk)
        tail = None if tail is None else nstep.tail(full, n)
        rows = nstep.n_step_transitions(full, n, gamma)
        buffer = replay_add(buffer, jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:]), rows))

        def one(s, k):
            batch = replay_sample(buffer, k, cfg.batch_size)
            ready = buffer.size >= cfg.min_replay_size
            return jax.lax.cond(
                ready, lambda s_: agent.update(s_, batch)[0], lambda s_: s_, s
            ), None

        state, _ = jax.lax.scan(one, state, jax.random.split(key, cfg.updates_per_iteration))
        return state, (buffer, tail)

    def describe(self, config) -> str:
        return f"replay table (samples/insert {config.replay.samples_per_insert:g})"

    def describe_batch(self, config) -> str:
        return f"{config.learner.batch_size} transitions"


def item_shape(config) -> tuple:
    """The leading dims of an item's fields: (k, B), or (B,) when k is 1 (the layout
    before `replay.item_steps`, so older runs' replay checkpoints still fit)."""
    k, b = config.replay.item_steps, config.actor.num_envs
    return (k, b) if k > 1 else (b,)


def replay_items(config) -> tuple:
    """(max_size, min_size) of the table in items of k x B transitions."""
    return replay_table.items(config, config.replay.item_steps * config.actor.num_envs)


def error_buffer(config) -> float:
    """The rate limiter's error buffer in items (of k x B transitions), derived when
    the config leaves it 0."""
    per_item = config.replay.item_steps * config.actor.num_envs
    return replay_table.error_buffer(config, per_item, config.learner.batch_size // per_item)


def replay_rows(tail, chunk, n: int, gamma: float, k: int):
    """(QTransition [R, B], tail): a chunk's n-step rows, R a multiple of k.

    A chunk of T steps (T a multiple of k) has T windows once the previous chunk's
    last steps are prepended, but the first chunk (`tail` None) only T - n + 1.
    With r = (T - n + 1) mod k, the first chunk emits its first T - n + 1 - r
    windows and keeps its last n - 1 + r steps as the tail; every later chunk
    computes the T + r windows of tail + chunk, emits the first T and keeps the
    last n - 1 + r steps again. So each (env, time) step starts exactly one
    emitted window, every shape is fixed (two compilations: the first chunk and
    the rest), and r = 0 (e.g. n = 1) is the plain carry of n - 1 steps.
    """
    t = chunk.reward.shape[0]
    r = (t - n + 1) % k
    if tail is None:
        full, emit = chunk, t - n + 1 - r
    else:
        full, emit = nstep.concat_tail(tail, chunk), t
    rows = nstep.n_step_transitions(full, n, gamma)
    new_tail = jax.tree.map(lambda x: x[x.shape[0] - (n - 1 + r) :], full)
    return jax.tree.map(lambda x: x[:emit], rows), new_tail
