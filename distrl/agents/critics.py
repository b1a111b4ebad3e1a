"""Shared parts of the actor-critic agents for Box actions (SAC, TD3): twin Q critics
trained on n-step replay samples, Polyak-averaged targets (their shared config fields
are `settings.CriticFields`).

Batch: `QTransition` [N] from the replay pipeline, as DQN's (`discount` is the full
bootstrap multiplier, gamma**k times the env's). The critic's loss is the squared
error of both Q heads to one target, each sample weighted by prioritized replay's
importance weight; |TD| (the heads' mean) is the samples' new priority.

A random start (`random_steps`, as the TD3 paper's and CleanRL's `start_timesteps` /
`learning_starts`): the agents' exploration rate (`Agent.epsilon`, of the run's env
steps) is 1 for the first `random_steps` env steps and 0 after, and their policy acts
uniformly at random in [-1, 1]^D where it explores, so the first transitions cover
the action space rather than one untrained, near-constant policy's corner of it.
"""

import jax
import jax.numpy as jnp
import optax

from distrl.agents import base
from distrl.types import QTransition


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


def greedy_value(critic, greedy):
    """`Agent.value` of a Box agent: (params, observations [B, ...]) -> min_i Q_i(s, a)
    [B] at the greedy action a = greedy(params, observations)."""

    def value(params, observations):
        return min_q(critic, params.critic, observations, greedy(params, observations))

    return value


def dummy_inputs(env_spec) -> tuple:
    """(observation, action) zeros of one step, to build the networks' params."""
    space = base.action_space(env_spec)
    obs = jnp.zeros(base.observation_shape(env_spec), jnp.float32)
    return obs, jnp.zeros(space.shape, jnp.float32)


def random_start(random_steps: int):
    """The exploration schedule of a random start: env_steps -> 1 before `random_steps`
    (jittable, as the actors and the single-process trainer call it), else 0."""

    def epsilon(env_steps) -> jnp.ndarray:
        return jnp.where(jnp.asarray(env_steps) < random_steps, 1.0, 0.0).astype(jnp.float32)

    return epsilon


def explore_uniformly(key, actions: jnp.ndarray, epsilon) -> jnp.ndarray:
    """`actions` [B, D] in policy units, each row replaced by a uniform draw from
    [-1, 1]^D with probability `epsilon`. `key` is the one the policy drew `actions`
    with: the draws here come from keys folded from it, so with epsilon 0 the actions
    are the policy's own draws, unchanged by the random start."""
    explore_key, uniform_key = jax.random.split(jax.random.fold_in(key, 1))
    explore = jax.random.uniform(explore_key, actions.shape[:1]) < epsilon
    uniform = jax.random.uniform(uniform_key, actions.shape, actions.dtype, -1.0, 1.0)
    return jnp.where(explore[:, None], uniform, actions)
