"""Stage 3 of the data flow: advantage actor-critic (A2C), REINFORCE and V-trace.

Batch: `Transition` [T, N] trajectory chunks with behaviour extras
{'log_prob': [T, N]} (and 'value' where PPO clips its value loss, `base.records_value`).
Advantages come from GAE(lambda) (or V-trace for stale behaviour policies) via
`distrl.agents.advantages`, which keeps bootstrapping right across truncation vs
termination. REINFORCE is `use_critic=False, gae_lambda=1.0`: Monte-Carlo returns,
no baseline. A chunk end cuts an episode's return, so distributed REINFORCE trains on
windows of whole episodes (`extras["owned"]`, see `distrl.agents.episodes`); without
that mark (the single-process trainer) use chunks longer than episodes.
"""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import optax

from distrl import networks
from distrl.agents import advantages as adv_lib
from distrl.agents import assembly, base, checks, recurrent, settings
from distrl.agents import distributions as dist
from distrl.types import CoreChunk, Transition


@dataclasses.dataclass(frozen=True, kw_only=True)
class ActorCriticConfig(settings.PolicyGradientFields):
    """A2C's (and REINFORCE's, V-trace's) settings, its defaults solve the non-slippery
    4x4 map: the fields of `settings.PolicyGradientFields` (what they mean, what it
    sets here) and its own; `RULES` below says what each accepts."""

    max_grad_norm: float = 1.0
    discount: float = 0.99  # 0.9 is steadier later but reaches the goal far slower
    use_critic: bool = True  # False (with gae_lambda=1): REINFORCE, no baseline
    vtrace: bool = False  # off-policy correction with the behaviour's extras['log_prob']
    clip_rho_threshold: float = 1.0  # V-trace: importance weights clipped at this, for values
    clip_pg_rho_threshold: float = 1.0  # V-trace: likewise for the policy gradient

    def __post_init__(self):
        base.freeze_sequences(self)
        checks.check(self, RULES)

    @property
    def has_critic(self) -> bool:
        """True when V is trained (A2C, V-trace); REINFORCE learns no value."""
        return self.use_critic

    @property
    def pipeline(self) -> base.PipelineKind:
        """Chunks; REINFORCE (no critic) needs whole episodes for its returns."""
        return base.PipelineKind.CHUNKS if self.use_critic else base.PipelineKind.EPISODES


RULES = {
    **settings.POLICY_GRADIENT_RULES,
    "use_critic": checks.FLAG,
    "vtrace": checks.FLAG,
    "clip_rho_threshold": checks.POSITIVE,
    "clip_pg_rho_threshold": checks.POSITIVE,
}


def _outputs(network, params, traj: Transition, start_state=None, with_next=True):
    """(policy [T, ...], V(obs) [T], and with_next V(next_obs) [T]) for one chunk: a
    feed-forward network on each step, or a recurrent one unrolled from `start_state`."""
    if start_state is not None:
        return recurrent.sequence_outputs(network, params, traj, start_state, with_next)
    outs = network.apply(params, traj.observation)
    return (outs, network.apply(params, traj.next_observation)[1]) if with_next else outs


def trajectory_advantages(
    network, config: ActorCriticConfig, params, traj: Transition, start_state=None
):
    """(advantages [T], value_targets [T]) for one chunk, without gradients; a recurrent
    network's from the core's state at the chunk's start."""
    (policy_out, v_obs), v_next = _outputs(network, params, traj, start_state)
    if not config.use_critic:
        v_obs, v_next = jnp.zeros_like(v_obs), jnp.zeros_like(v_next)
    if config.vtrace:
        log_rho = dist.log_prob(policy_out, traj.action) - traj.extras["log_prob"]
        return adv_lib.vtrace(
            traj,
            v_obs,
            v_next,
            log_rho,
            config.discount,
            config.gae_lambda,
            config.clip_rho_threshold,
            config.clip_pg_rho_threshold,
        )
    return adv_lib.gae(traj, v_obs, v_next, config.discount, config.gae_lambda)


def entropy_weight(config: ActorCriticConfig, step):
    """The entropy bonus's weight [] after `step` updates: entropy_coef, decayed linearly
    to entropy_coef_final over entropy_decay_steps (a soft policy explores early, and a
    sharper one late lets the greedy action follow small advantages)."""
    if not config.entropy_decay_steps:
        return config.entropy_coef
    done = jnp.minimum(step / config.entropy_decay_steps, 1.0)
    return config.entropy_coef + done * (config.entropy_coef_final - config.entropy_coef)


def trajectory_loss(
    network,
    config: ActorCriticConfig,
    params,
    traj: Transition,
    advantage,
    value_target,
    step=0,
    start_state=None,
):
    """Loss [] and metrics for one chunk [T] given advantages and targets [T]; step:
    updates so far (the entropy weight's schedule); start_state: a recurrent core's."""
    policy_out, v = _outputs(network, params, traj, start_state, with_next=False)
    pg_loss = dist.policy_gradient_loss(policy_out, traj.action, advantage)
    entropy_loss = -jnp.mean(dist.entropy(policy_out))  # = rlax.entropy_loss for logits
    value_loss = 0.5 * jnp.mean(jnp.square(jax.lax.stop_gradient(value_target) - v))
    if not config.use_critic:
        value_loss = jnp.zeros_like(value_loss)
    loss = pg_loss + config.value_coef * value_loss + entropy_weight(config, step) * entropy_loss
    metrics = {"pg_loss": pg_loss, "value_loss": value_loss, "entropy": -entropy_loss}
    return loss, metrics


def loss_fn(network, config: ActorCriticConfig, params, batch: Transition, step=0):
    """Mean loss over a batch [T, N] (vmapped over N); returns (loss, metrics).
    step: updates applied so far (for the entropy weight's schedule). A recurrent
    core's batch is a `CoreChunk`: each sequence unrolled from its start state."""
    start, start_axis = None, None
    if isinstance(batch, CoreChunk):
        start, start_axis = jax.tree.map(lambda x: x[0], batch.core_state), 0
        batch = batch.chunk
    adv, targets = jax.vmap(trajectory_advantages, (None, None, None, 1, start_axis), 1)(
        network, config, params, batch, start
    )  # [T, N]
    if config.normalize_advantages:
        adv = adv_lib.normalize(adv, jnp.ones_like(adv))
    adv = adv_lib.owned_only(adv, batch)
    losses, metrics = jax.vmap(trajectory_loss, (None, None, None, 1, 1, 1, None, start_axis))(
        network, config, params, batch, adv, targets, step, start
    )
    metrics = jax.tree.map(jnp.mean, metrics)
    metrics["advantage_mean"] = jnp.mean(adv)
    loss = jnp.mean(losses)
    metrics["loss"] = loss
    return loss, metrics


def make_policy_fns(net, with_value: bool):
    """(policy, greedy, value, probs) shared by the policy-gradient agents (A2C, PPO):
    a softmax over discrete actions or a squashed Gaussian (`distributions`); probs is
    the softmax's (a Gaussian's has no table of them). with_value: the policy's extras
    carry V(s) (`base.records_value`)."""

    def policy(params, key, observations, epsilon):
        """Samples the policy; epsilon is ignored."""
        del epsilon
        policy_out, value = net.apply(params, observations)  # [B, ...], [B]
        return dist.behaviour(key, policy_out, value, with_value)

    def greedy(params, observations):
        """The mode: the argmax action, or a Gaussian's squashed mean."""
        return dist.mode(net.apply(params, observations)[0])

    def value(params, observations):
        return net.apply(params, observations)[1]

    def probs(params, observations):
        """The softmax the actors sample from [B, A]: the policy the critic's V is for."""
        return jax.nn.softmax(net.apply(params, observations)[0], axis=-1)

    return policy, greedy, value, probs


def _update(net, optimizer, config, state: base.TrainingState, batch: Transition):
    """One gradient step on a batch [T, N]: -> (state, metrics)."""
    grads, metrics = jax.grad(loss_fn, argnums=2, has_aux=True)(
        net, config, state.params, batch, state.step
    )
    updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    metrics["grad_norm"] = base.global_norm(grads)
    return base.TrainingState(params, None, opt_state, state.key, state.step + 1), metrics


def make_agent(config: ActorCriticConfig, env_spec) -> base.Agent:
    """Builds the A2C / REINFORCE agent for an env spec (`base.EnvSpec` or the env's)."""
    if recurrent.is_recurrent(config):
        return recurrent.make_agent(config, env_spec, _update)
    return make_policy_gradient_agent(config, env_spec, _update)


def make_policy_gradient_agent(config, env_spec, update_impl) -> base.Agent:
    """An actor-critic network, optimizer and policies around `update_impl`.

    Shared by A2C and PPO, which differ only in their update:
    `update_impl(net, optimizer, config, state, batch) -> (state, metrics)`.
    """
    obs_shape = base.observation_shape(env_spec)
    torso = networks.torso_of(config, obs_shape)
    net = networks.make_actor_critic_network(
        torso, base.action_space(env_spec), config.shared_torso
    )
    optimizer = base.optimizer_of(config)
    policy, greedy, value, probs = make_policy_fns(net, base.records_value(config))
    return assembly.assemble(
        config,
        net,
        base.make_init(net, optimizer, obs_shape, with_target=False),
        functools.partial(update_impl, net, optimizer, config),
        (policy, greedy, value),
        valued=base.ValuedPolicy("sampling", probs) if config.has_critic else None,
    )
