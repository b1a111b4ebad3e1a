"""Stage 3 of the data flow: soft actor-critic (SAC) for Box actions.

A tanh-squashed Gaussian actor whose log std depends on the state, twin Q critics
and their Polyak-averaged targets (`critics`), and an entropy temperature alpha tuned
so the policy's entropy, estimated by -log pi(a) of its own samples, tracks a target
(-target_entropy_scale x D). One update, one jit: the critics step towards
r + discount (min_i Q'_i(s', a') - alpha log pi(a'|s')), a' sampled now; the actor
minimises alpha log pi(a|s) - min_i Q_i(s, a) through the reparameterized sample; alpha
steps on -log alpha (log pi(a|s) + target). Actors sample the policy; the greedy
policy is the squashed mean.
"""

import dataclasses
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from distrl import networks
from distrl.agents import assembly, base, checks, critics, settings
from distrl.agents import distributions as dist
from distrl.types import QTransition


@dataclasses.dataclass(frozen=True, kw_only=True)
class SACConfig(settings.CriticFields):
    """SAC's settings: the fields of `settings.CriticFields` (what they mean, what it
    sets here) and its own; `RULES` below says what each accepts."""

    critic_learning_rate: float = 1e-3
    temperature_learning_rate: float = 1e-3  # log alpha's step size (Adam)
    initial_temperature: float = 1.0  # alpha at the start
    target_entropy_scale: float = 1.0  # target entropy = -scale x D (D action elements)

    def __post_init__(self):
        base.freeze_sequences(self)
        checks.check(self, RULES)


RULES = {
    **settings.CRITIC_RULES,
    "temperature_learning_rate": checks.POSITIVE,
    "initial_temperature": checks.POSITIVE,
    "target_entropy_scale": checks.FINITE,
}


class SACParams(NamedTuple):
    actor: base.Params
    critic: base.Params
    log_alpha: jnp.ndarray  # [] log of the entropy temperature


class _Nets(NamedTuple):
    actor: object
    critic: object
    optimizers: tuple  # (actor, critic, temperature)
    target_entropy: float
    tau: float  # Polyak step of the target critics


def _actor_loss(nets: _Nets, actor_params, critic_params, alpha, obs, key):
    """(loss [], log pi of the samples [N]): E[alpha log pi(a|s) - min_i Q_i(s, a)]."""
    actions, log_pi = dist.sample(key, nets.actor.apply(actor_params, obs))
    q = critics.min_q(nets.critic, critic_params, obs, actions)
    return jnp.mean(alpha * log_pi - q), log_pi


def temperature_loss(log_alpha, log_pi, target_entropy):
    """-log alpha (log pi + target), log pi held constant: alpha rises while the
    policy's entropy (-log pi) is below the target and falls while it is above."""
    return -jnp.mean(log_alpha * jax.lax.stop_gradient(log_pi + target_entropy))


def _update(nets: _Nets, state: base.TrainingState, batch: QTransition, weights=None):
    """One critic, actor and temperature step, then the targets' Polyak step."""
    params: SACParams = state.params
    actor_opt, critic_opt, alpha_opt = nets.optimizers
    opt_actor, opt_critic, opt_alpha = state.opt_state
    key, next_key, actor_key = jax.random.split(state.key, 3)
    alpha = jnp.exp(params.log_alpha)

    next_actions, next_log_pi = dist.sample(
        next_key, nets.actor.apply(params.actor, batch.next_observation)
    )
    target_q = critics.min_q(nets.critic, state.target_params, batch.next_observation, next_actions)
    critic_params, opt_critic, metrics = critics.critic_step(
        nets.critic,
        critic_opt,
        params.critic,
        opt_critic,
        batch,
        target_q - alpha * next_log_pi,
        weights,
    )

    (actor_loss, log_pi), grads = jax.value_and_grad(_actor_loss, argnums=1, has_aux=True)(
        nets, params.actor, critic_params, alpha, batch.observation, actor_key
    )
    updates, opt_actor = actor_opt.update(grads, opt_actor, params.actor)
    actor_params = optax.apply_updates(params.actor, updates)

    alpha_grad = jax.grad(temperature_loss)(params.log_alpha, log_pi, nets.target_entropy)
    updates, opt_alpha = alpha_opt.update(alpha_grad, opt_alpha, params.log_alpha)
    log_alpha = optax.apply_updates(params.log_alpha, updates)

    target = critics.polyak(critic_params, state.target_params, nets.tau)
    metrics.update(
        actor_loss=actor_loss,
        entropy=-jnp.mean(log_pi),
        temperature=jnp.exp(log_alpha),
        actor_grad_norm=base.global_norm(grads),
    )
    new = SACParams(actor_params, critic_params, log_alpha)
    opt_state = (opt_actor, opt_critic, opt_alpha)
    return base.TrainingState(new, target, opt_state, key, state.step + 1), metrics


def make_agent(config: SACConfig, env_spec) -> base.Agent:
    """Builds the SAC agent for an env spec with a Box action space."""
    space = base.action_space(env_spec)
    torso = networks.torso_of(config, base.observation_shape(env_spec))
    actor = networks.make_gaussian_actor(torso, space)
    critic = networks.make_twin_critic(torso)
    optimizers = (
        base.optimizer_of(config),
        critics.critic_optimizer(config),
        optax.adam(config.temperature_learning_rate),
    )
    size = networks.action_size(space)
    nets = _Nets(actor, critic, optimizers, -config.target_entropy_scale * size, config.tau)
    obs0, action0 = critics.dummy_inputs(env_spec)

    @jax.jit
    def init(key):
        key, actor_key, critic_key = jax.random.split(key, 3)
        critic_params = critic.init(critic_key, obs0, action0)
        params = SACParams(
            actor.init(actor_key, obs0),
            critic_params,
            jnp.log(jnp.float32(config.initial_temperature)),
        )
        opt_state = tuple(o.init(p) for o, p in zip(optimizers, params))
        return base.TrainingState(params, critic_params, opt_state, key, jnp.zeros((), jnp.int32))

    def policy(params, key, observations, epsilon):
        """Samples the squashed Gaussian, or with probability `epsilon` (the random
        start's) acts uniformly: obs [B, ...] -> (actions [B, D], {})."""
        sampled = dist.sample(key, actor.apply(params.actor, observations))[0]
        return critics.explore_uniformly(key, sampled, epsilon), {}

    def greedy(params, observations):
        return dist.mode(actor.apply(params.actor, observations))

    return assembly.assemble(
        config,
        actor,
        init,
        functools.partial(_update, nets),
        (policy, greedy, critics.greedy_value(critic, greedy)),
        critics.random_start(config.random_steps),
    )
