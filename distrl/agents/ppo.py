"""Stage 3 of the data flow: PPO (clipped surrogate) and its GRPO variant.

Batch: `Transition` [T, N] with behaviour extras {'log_prob'} [T, N] recorded at
acting time, and 'value' with `clip_value`. One jitted `update` computes advantages once (GAE with
the truncation-aware trick of `distrl.agents.advantages`, or group-relative
GRPO), then runs `num_epochs` x `num_minibatches` Adam steps on shuffled time
steps with `lax.scan`, all in one compiled call.

GRPO scores only episodes that end inside their chunk (see `advantages.grpo`): the
distributed actor writes windows of whole episodes (`distrl.agents.episodes`); the
single-process trainer needs chunks longer than most episodes (e.g. T=64 on the 4x4
map), or the greedy policy does not settle.
"""

import dataclasses
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from distrl.agents import actor_critic, base, checks, recurrent, rows, settings
from distrl.agents import advantages as adv_lib
from distrl.agents import distributions as dist
from distrl.agents.rlax_import import rlax
from distrl.types import CoreChunk, Transition


@dataclasses.dataclass(frozen=True, kw_only=True)
class PPOConfig(settings.PolicyGradientFields):
    """PPO's (and GRPO's) settings, its defaults solve the non-slippery 4x4 map: the
    fields of `settings.PolicyGradientFields` (what they mean, what it sets here)
    and its own; `RULES` below says what each accepts."""

    max_grad_norm: float = 0.5
    discount: float = 0.9  # 0.99 reaches the goal too, but its greedy policy later flips
    # to wall bumps in some evaluations (a 1% value gap); 0.9 stays put
    clip_epsilon: float = 0.2  # probability ratio clipped to [1 - eps, 1 + eps]
    clip_value: bool = False  # clip V around extras['value'] by clip_epsilon
    num_epochs: int = 4  # passes over each batch per update
    num_minibatches: int = 4  # minibatches (of time steps) per epoch
    advantage: str = "gae"  # "gae" | "grpo" (group-relative, no critic)

    def __post_init__(self):
        base.freeze_sequences(self)
        checks.check(self, RULES)

    @property
    def has_critic(self) -> bool:
        """True when V is trained (GAE); GRPO's group-relative advantages need none."""
        return self.advantage != "grpo"

    @property
    def pipeline(self) -> base.PipelineKind:
        """Chunks; GRPO's group-relative advantages need whole episodes."""
        return base.PipelineKind.EPISODES if self.advantage == "grpo" else base.PipelineKind.CHUNKS


RULES = {
    **settings.POLICY_GRADIENT_RULES,
    "clip_epsilon": checks.POSITIVE,
    "clip_value": checks.FLAG,
    "num_epochs": checks.at_least(1),
    "num_minibatches": checks.at_least(1),
    "advantage": checks.one_of("gae", "grpo"),
}


class PPOSample(NamedTuple):
    """One time step as PPO trains on it; fields gain a leading [M] dim."""

    observation: jnp.ndarray  # [O]
    action: jnp.ndarray  # [] int32, or [D] float32 (a Box)
    behaviour_log_prob: jnp.ndarray  # []
    behaviour_value: jnp.ndarray | None  # [], or None where not recorded (`clip_value` off)
    advantage: jnp.ndarray  # []
    value_target: jnp.ndarray  # []


class PPOSequences(NamedTuple):
    """Whole env sequences as recurrent PPO trains on them: `PPOSample`'s fields [T, n],
    the episode ends `last` [T, n] and the core's state at t = 0 (leaves [n, ...])."""

    observation: jnp.ndarray
    action: jnp.ndarray
    behaviour_log_prob: jnp.ndarray
    behaviour_value: jnp.ndarray
    advantage: jnp.ndarray
    value_target: jnp.ndarray
    last: jnp.ndarray
    start_state: tuple


def _values(network, params, batch: Transition):
    """(V(obs), V(next_obs)) [T, N] of a feed-forward network."""
    return network.apply(params, batch.observation)[1], network.apply(
        params, batch.next_observation
    )[1]


def batch_advantages(network, config: PPOConfig, params, batch: Transition, values=_values):
    """(advantages [T, N], value_targets [T, N], metrics) before any epoch; values:
    (network, params, batch) -> (V(obs), V(next_obs)) [T, N]."""
    if config.advantage == "grpo":
        adv, _, group = adv_lib.grpo(batch, config.discount)
        adv = adv_lib.owned_only(adv, batch)
        return adv, jnp.zeros_like(adv), {"group_size": group}
    if config.advantage != "gae":
        raise ValueError(f"unknown advantage {config.advantage!r}; use 'gae' or 'grpo'")
    v_obs, v_next = values(network, params, batch)  # [T, N] each
    adv, targets = jax.vmap(adv_lib.gae, (1, 1, 1, None, None), 1)(
        batch, v_obs, v_next, config.discount, config.gae_lambda
    )
    if config.normalize_advantages:
        adv = adv_lib.normalize(adv, jnp.ones_like(adv))
    return adv, targets, {}


def example_terms(network, params, sample: PPOSample):
    """Forward pass for ONE sample: (log_prob [], value [], entropy [])."""
    policy_out, value = network.apply(params, sample.observation)  # [A] or [D] x 2, []
    return dist.log_prob(policy_out, sample.action), value, dist.entropy(policy_out)


def _sample_terms(network, params, mb: PPOSample):
    """(log_prob, value, entropy) [M] of a minibatch of time steps."""
    return jax.vmap(example_terms, (None, None, 0))(network, params, mb)


def sequence_terms(network, params, mb: PPOSequences):
    """(log_prob, value, entropy) [T, n] of whole sequences: the core unrolled from their
    start state, reset where their episodes end (`recurrent.unroll`)."""
    policy_out, value = recurrent.sequence_outputs(network, params, mb, mb.start_state)
    return dist.log_prob(policy_out, mb.action), value, dist.entropy(policy_out)


def minibatch_loss(
    network, config: PPOConfig, params, mb: PPOSample, entropy_coef=None, terms=_sample_terms
):
    """PPO loss [] over a minibatch [M] (or [T, n] sequences, terms=`sequence_terms`);
    returns (loss, metrics). entropy_coef: the bonus's weight at this update
    (`actor_critic.entropy_weight`; None: config's)."""
    flat = lambda x: x.reshape(-1)  # noqa: E731 - sequences [T, n] as [T * n] steps
    log_prob, value, entropy = jax.tree.map(flat, terms(network, params, mb))
    behaviour_log_prob, advantage, value_target = map(
        flat, (mb.behaviour_log_prob, mb.advantage, mb.value_target)
    )
    log_ratio = log_prob - behaviour_log_prob  # [M]
    ratio = jnp.exp(log_ratio)
    pg_loss = rlax.clipped_surrogate_pg_loss(ratio, advantage, config.clip_epsilon)
    value_err = jnp.square(value - value_target)
    if config.clip_value:  # around V at acting time, which the actors record for it
        behaviour_value = flat(mb.behaviour_value)
        clipped = behaviour_value + jnp.clip(
            value - behaviour_value, -config.clip_epsilon, config.clip_epsilon
        )
        value_err = jnp.maximum(value_err, jnp.square(clipped - value_target))
    value_loss = 0.5 * jnp.mean(value_err)
    if config.advantage == "grpo":  # no critic
        value_loss = jnp.zeros_like(value_loss)
    entropy = jnp.mean(entropy)
    weight = config.entropy_coef if entropy_coef is None else entropy_coef
    loss = pg_loss + config.value_coef * value_loss - weight * entropy
    clip_frac = jnp.mean((jnp.abs(ratio - 1.0) > config.clip_epsilon).astype(jnp.float32))
    # KL(behaviour || current), the k3 estimate (ratio - 1 - log ratio >= 0): with the
    # clip fraction it shows the step size against the clip range
    approx_kl = jnp.mean(jnp.exp(log_ratio) - 1.0 - log_ratio)
    metrics = {
        "loss": loss,
        "pg_loss": pg_loss,
        "value_loss": value_loss,
        "entropy": entropy,
        "clip_fraction": clip_frac,
        "approx_kl": approx_kl,
    }
    return loss, metrics


def _minibatch_step(loss, optimizer, carry, mb):
    """One Adam step on a minibatch; scanned over minibatches."""
    params, opt_state = carry
    grads, metrics = jax.grad(loss, has_aux=True)(params, mb)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    metrics["grad_norm"] = base.global_norm(grads)
    return (optax.apply_updates(params, updates), opt_state), metrics


def _shuffle(key, flat: PPOSample, num_minibatches: int) -> PPOSample:
    """[S] samples -> [num_minibatches, S // num_minibatches] in random order."""
    size = flat.action.shape[0]
    mb_size = size // num_minibatches  # a remainder of < num_minibatches is dropped
    perm = jax.random.permutation(key, size)[: mb_size * num_minibatches]
    return rows.take(flat, perm.reshape(num_minibatches, mb_size))


def _shuffle_sequences(key, seqs: PPOSequences, num_minibatches: int) -> PPOSequences:
    """[T, N] sequences -> [num_minibatches, T, N // num_minibatches] of whole sequences
    in random order (the start states [num_minibatches, N // num_minibatches, ...])."""
    size = seqs.action.shape[1]
    mb_size = size // num_minibatches  # a remainder of < num_minibatches is dropped
    perm = jax.random.permutation(key, size)[: mb_size * num_minibatches]

    def split(x):  # [T, N, ...] -> [num_minibatches, T, mb_size, ...]
        x = x[:, perm].reshape((x.shape[0], num_minibatches, mb_size) + x.shape[2:])
        return jnp.moveaxis(x, 1, 0)

    timed = jax.tree.map(split, seqs._replace(start_state=()))
    start = jax.tree.map(
        lambda x: x[perm].reshape((num_minibatches, mb_size) + x.shape[1:]), seqs.start_state
    )
    return timed._replace(start_state=start)


def make_samples(batch: Transition, adv, targets, flatten: bool = True) -> PPOSample:
    """Flattens a batch [T, N] and its advantages into PPOSample [T * N] (flatten=False:
    kept [T, N])."""
    samples = PPOSample(
        batch.observation,
        batch.action,
        batch.extras["log_prob"],
        batch.extras.get("value"),  # recorded only for clip_value (`base.records_value`)
        adv,
        targets,
    )
    if not flatten:
        return samples
    return jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:]), samples)


def _update(net, optimizer, config: PPOConfig, state: base.TrainingState, batch: Transition):
    """Advantages once, then epochs x shuffled minibatches of Adam steps (lax.scan)."""
    adv, targets, adv_metrics = batch_advantages(net, config, state.params, batch)
    flat = make_samples(batch, adv, targets)  # [T * N]
    return _optimize(net, optimizer, config, state, flat, _shuffle, _sample_terms, adv, adv_metrics)


def _recurrent_update(net, optimizer, config: PPOConfig, state, batch: CoreChunk):
    """`_update` for a recurrent core: the core unrolled over each chunk from the state
    stored with it; minibatches of whole env sequences (split over N, not over time)."""
    chunk = batch.chunk
    start = jax.tree.map(lambda x: x[0], batch.core_state)  # [N, ...]

    def values(network, params, chunk):
        (_, v_obs), v_next = recurrent.sequence_outputs(network, params, chunk, start, True)
        return v_obs, v_next

    adv, targets, adv_metrics = batch_advantages(net, config, state.params, chunk, values)
    seqs = PPOSequences(
        *make_samples(chunk, adv, targets, flatten=False), last=chunk.last, start_state=start
    )
    return _optimize(
        net, optimizer, config, state, seqs, _shuffle_sequences, sequence_terms, adv, adv_metrics
    )


def _optimize(net, optimizer, config, state, samples, shuffle, terms, adv, adv_metrics):
    """Epochs x shuffled minibatches of `samples` (lax.scan): -> (state, metrics)."""
    weight = actor_critic.entropy_weight(config, state.step)
    loss = functools.partial(minibatch_loss, net, config, entropy_coef=weight, terms=terms)
    step_fn = functools.partial(_minibatch_step, loss, optimizer)

    def epoch(carry, key):
        minibatches = shuffle(key, samples, config.num_minibatches)
        return jax.lax.scan(step_fn, carry, minibatches)

    key, *epoch_keys = jax.random.split(state.key, config.num_epochs + 1)
    (params, opt_state), metrics = jax.lax.scan(
        epoch, (state.params, state.opt_state), jnp.stack(epoch_keys)
    )
    metrics = jax.tree.map(jnp.mean, metrics)  # over epochs and minibatches
    metrics.update(adv_metrics)
    metrics["advantage_abs"] = jnp.mean(jnp.abs(adv))
    return base.TrainingState(params, None, opt_state, key, state.step + 1), metrics


def make_agent(config: PPOConfig, env_spec) -> base.Agent:
    """Builds the PPO / GRPO agent for an env spec (`base.EnvSpec` or the env's)."""
    if recurrent.is_recurrent(config):
        return recurrent.make_agent(config, env_spec, _recurrent_update)
    return actor_critic.make_policy_gradient_agent(config, env_spec, _update)
