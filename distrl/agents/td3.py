"""Stage 3 of the data flow: TD3 (twin delayed deep deterministic policy gradient) for
Box actions.

A deterministic actor a = mu(s) in [-1, 1]^D, twin Q critics and Polyak-averaged
targets of both (`critics`). The critics step every update towards
r + discount min_i Q'_i(s', mu'(s') + clip(noise, +-noise_clip)) (target policy
smoothing: the target of a noisy action, clipped into [-1, 1]); every
`policy_delay`-th update the actor ascends Q_1(s, mu(s)) and the targets take their
Polyak step. Actors act mu(s) plus Gaussian exploration noise, clipped into [-1, 1];
the greedy policy is mu(s).
"""

import dataclasses
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from distrl import networks, spaces
from distrl.agents import assembly, base, checks, critics, settings


@dataclasses.dataclass(frozen=True, kw_only=True)
class TD3Config(settings.CriticFields):
    """TD3's settings: the fields of `settings.CriticFields` (what they mean, what it
    sets here) and its own; `RULES` below says what each accepts."""

    critic_learning_rate: float = 3e-4
    policy_delay: int = 2  # critic updates per actor (and target) update
    exploration_noise: float = 0.1  # std of the actors' Gaussian noise, in policy units [-1, 1]
    policy_noise: float = 0.2  # std of the target policy's smoothing noise, in policy units
    noise_clip: float = 0.5  # the smoothing noise is clipped to +-this

    def __post_init__(self):
        base.freeze_sequences(self)
        checks.check(self, RULES)


RULES = {
    **settings.CRITIC_RULES,
    "policy_delay": checks.at_least(1),
    "exploration_noise": checks.NONNEGATIVE,
    "policy_noise": checks.NONNEGATIVE,
    "noise_clip": checks.NONNEGATIVE,
}


class TD3Params(NamedTuple):
    actor: base.Params
    critic: base.Params


def _in_range(actions):
    return jnp.clip(actions, spaces.POLICY_LOW, spaces.POLICY_HIGH)


def _actor_loss(actor, critic, actor_params, critic_params, obs):
    """-mean Q_1(s, mu(s)): the first critic alone, as TD3 does."""
    return -jnp.mean(critic.apply(critic_params, obs, actor.apply(actor_params, obs))[..., 0])


def _update(actor, critic, optimizers, config, state: base.TrainingState, batch, weights=None):
    """A critic step; on every `policy_delay`-th update an actor step and the targets'."""
    params: TD3Params = state.params
    target: TD3Params = state.target_params
    actor_opt, critic_opt = optimizers
    opt_actor, opt_critic = state.opt_state
    key, noise_key = jax.random.split(state.key)

    noise = config.policy_noise * jax.random.normal(noise_key, batch.action.shape)
    noise = jnp.clip(noise, -config.noise_clip, config.noise_clip)
    next_actions = _in_range(actor.apply(target.actor, batch.next_observation) + noise)
    target_q = critics.min_q(critic, target.critic, batch.next_observation, next_actions)
    critic_params, opt_critic, metrics = critics.critic_step(
        critic, critic_opt, params.critic, opt_critic, batch, target_q, weights
    )

    actor_loss, grads = jax.value_and_grad(_actor_loss, argnums=2)(
        actor, critic, params.actor, critic_params, batch.observation
    )
    updates, new_opt_actor = actor_opt.update(grads, opt_actor, params.actor)
    new_actor = optax.apply_updates(params.actor, updates)
    step = state.step + 1
    due = (step % config.policy_delay) == 0

    def when_due(new, old):
        return jax.tree.map(lambda n, o: jnp.where(due, n, o), new, old)

    actor_params = when_due(new_actor, params.actor)
    opt_actor = when_due(new_opt_actor, opt_actor)
    new_params = TD3Params(actor_params, critic_params)
    new_target = when_due(critics.polyak(new_params, target, config.tau), target)
    metrics.update(actor_loss=actor_loss, actor_grad_norm=base.global_norm(grads))
    opt_state = (opt_actor, opt_critic)
    return base.TrainingState(new_params, new_target, opt_state, key, step), metrics


def make_agent(config: TD3Config, env_spec) -> base.Agent:
    """Builds the TD3 agent for an env spec with a Box action space."""
    space = base.action_space(env_spec)
    torso = networks.torso_of(config, base.observation_shape(env_spec))
    actor = networks.make_deterministic_actor(torso, space)
    critic = networks.make_twin_critic(torso)
    optimizers = (base.optimizer_of(config), critics.critic_optimizer(config))
    obs0, action0 = critics.dummy_inputs(env_spec)

    @jax.jit
    def init(key):
        key, actor_key, critic_key = jax.random.split(key, 3)
        params = TD3Params(actor.init(actor_key, obs0), critic.init(critic_key, obs0, action0))
        opt_state = tuple(o.init(p) for o, p in zip(optimizers, params))
        return base.TrainingState(params, params, opt_state, key, jnp.zeros((), jnp.int32))

    def policy(params, key, observations, epsilon):
        """mu(s) plus Gaussian noise, clipped into [-1, 1], or with probability `epsilon`
        (the random start's) a uniform action: (actions [B, D], {})."""
        mu = actor.apply(params.actor, observations)
        noisy = _in_range(mu + config.exploration_noise * jax.random.normal(key, mu.shape))
        return critics.explore_uniformly(key, noisy, epsilon), {}

    def greedy(params, observations):
        return actor.apply(params.actor, observations)

    return assembly.assemble(
        config,
        actor,
        init,
        functools.partial(_update, actor, critic, optimizers, config),
        (policy, greedy, critics.greedy_value(critic, greedy)),
        critics.random_start(config.random_steps),
    )
