"""Shared parts of the actor-critic agents for Box actions (SAC, TD3): their config
fields, twin Q critics trained on n-step replay samples, Polyak-averaged targets.

Batch: `QTransition` [N] from the replay pipeline, as DQN's (`discount` is the full
bootstrap multiplier, gamma**k times the env's). The critic's loss is the squared
error of both Q heads to one target, each sample weighted by prioritized replay's
importance weight; |TD| (the heads' mean) is the samples' new priority.
"""

import jax
import jax.numpy as jnp
import optax

from distrl import networks, spaces
from distrl.agents import base, checks
from distrl.types import QTransition

# The fields both agents have, with their rules (each config lists its defaults).
RULES = {
    "hidden_sizes": checks.SIZES,
    "activation": checks.one_of(*networks.ACTIVATIONS),
    **checks.torso_rules(networks.TORSOS),
    **checks.optimizer_rules(base.OPTIMIZERS),
    "critic_learning_rate": checks.POSITIVE,
    "n_step": checks.at_least(1),
    "tau": checks.OPEN_FRACTION,
}
ACTION_SPACES = (spaces.Box,)


def critic_optimizer(config) -> optax.GradientTransformation:
    """The critics' optimizer: the actor's, at `critic_learning_rate`."""
    return base.make_optimizer(
        config.critic_learning_rate,
        config.max_grad_norm,
        config.optimizer,
        config.learning_rate_decay_steps,
        config.learning_rate_final,
    )


def critic_loss(critic, params, batch: QTransition, target_q, weights):
    """(loss [], |TD| [N]): 0.5 (Q_i(s, a) - y)^2 summed over the two heads, weighted
    mean over the batch; y = r + discount * target_q is held constant."""
    y = jax.lax.stop_gradient(batch.reward + batch.discount * target_q)  # [N]
    q = critic.apply(params, batch.observation, batch.action)  # [N, 2]
    td = q - y[:, None]
    losses = 0.5 * jnp.sum(jnp.square(td), axis=-1)
    if weights is not None:
        losses = losses * weights
    return jnp.mean(losses), jnp.mean(jnp.abs(jax.lax.stop_gradient(td)), axis=-1)


def critic_step(critic, optimizer, params, opt_state, batch, target_q, weights):
    """One optimizer step of the critics -> (params, opt_state, metrics)."""
    (loss, td_abs), grads = jax.value_and_grad(critic_loss, argnums=1, has_aux=True)(
        critic, params, batch, target_q, weights
    )
    updates, opt_state = optimizer.update(grads, opt_state, params)
    metrics = {"critic_loss": loss, "td_abs": jnp.mean(td_abs), "priorities": td_abs}
    metrics["critic_grad_norm"] = base.global_norm(grads)
    return optax.apply_updates(params, updates), opt_state, metrics


def polyak(params, target, tau: float):
    """target <- tau * params + (1 - tau) * target."""
    return optax.incremental_update(params, target, tau)


def min_q(critic, params, observations, actions) -> jnp.ndarray:
    """min over the two heads [...]: the pessimistic Q both agents act on and bootstrap."""
    return jnp.min(critic.apply(params, observations, actions), axis=-1)


def dummy_inputs(env_spec) -> tuple:
    """(observation, action) zeros of one step, to build the networks' params."""
    space = base.action_space(env_spec)
    obs = jnp.zeros(base.observation_shape(env_spec), jnp.float32)
    return obs, jnp.zeros(space.shape, jnp.float32)
