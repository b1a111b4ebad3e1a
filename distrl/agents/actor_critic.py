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

from distrl import networks, spaces
from distrl.agents import advantages as adv_lib
from distrl.agents import base, checks, recurrent
from distrl.agents import distributions as dist
from distrl.types import CoreChunk, Transition


@dataclasses.dataclass(frozen=True)
class ActorCriticConfig:
    """A2C settings; the defaults solve the non-slippery 4x4 map.

    Every field is a setting of the experiment config's `agent` section
    (`--config.agent.<field>=`); `RULES` below says what each accepts.
    """

    ACTION_SPACES = (spaces.Discrete, spaces.Box)  # what it acts in (checks.check_action_space)

    hidden_sizes: tuple[int, ...] = (64,)  # hidden layer widths (policy and value torsos)
    shared_torso: bool = False  # one torso for policy and value, else one each
    activation: str = "tanh"  # nonlinearity: "relu" | "tanh" | "elu"
    torso: str = "auto"  # "mlp" | "conv" (Conv2D layers, then the MLP) | "auto": conv on
    # image observations [H, W, C] (MinAtar's 10x10xC), the MLP on any other shape
    conv_channels: tuple[int, ...] = (16,)  # conv torso: output channels of each Conv2D layer
    conv_kernel: int = 3  # conv torso: square kernel side of every Conv2D layer, in pixels
    optimizer: str = "adam"  # "adam" | "sgd"
    learning_rate: float = 1e-2  # optimizer step size (per update)
    learning_rate_decay_steps: int = 0  # updates of linear decay to learning_rate_final; 0: none
    learning_rate_final: float = 0.0  # the step size after the decay
    max_grad_norm: float = 1.0  # global-norm gradient clip; <= 0 disables
    discount: float = 0.99  # gamma per env step; 0.9 is steadier later but reached the goal
    # 3-10x slower
    gae_lambda: float = 0.95  # GAE / V-trace lambda (1: Monte-Carlo returns in the chunk)
    use_critic: bool = True  # False (with gae_lambda=1): REINFORCE, no baseline
    value_coef: float = 0.5  # weight of the value loss in the total loss
    entropy_coef: float = 0.05  # weight of the entropy bonus in the total loss
    entropy_decay_steps: int = 0  # updates of linear decay to entropy_coef_final; 0: none
    entropy_coef_final: float = 0.0  # the entropy bonus's weight after the decay
    normalize_advantages: bool = False  # advantages to zero mean, unit std over the batch
    record_value: bool = False  # actors record V(s) in extras['value'] (PPO's clip_value
    # does anyway; else no learner reads it, and acting without it is faster)
    normalize_observations: bool = False  # standardise observations by running statistics
    # the learner keeps in the params (`networks.ObservationNorm`; MuJoCo's, as VecNormalize)
    vtrace: bool = False  # off-policy correction with the behaviour's extras['log_prob']
    clip_rho_threshold: float = 1.0  # V-trace: importance weights clipped at this, for values
    clip_pg_rho_threshold: float = 1.0  # V-trace: likewise for the policy gradient
    core: str = "none"  # "none" (feed-forward) | "gru": a GRU after each torso, its state
    # carried by the actors and stored at each chunk's start (`agents.recurrent`)
    core_size: int = 128  # the GRU's width (core "gru")

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


# The network's fields, shared with PPO (same actor-critic network).
TORSO_RULES = {
    "hidden_sizes": checks.SIZES,
    "shared_torso": checks.FLAG,
    "activation": checks.one_of(*networks.ACTIVATIONS),
    **checks.torso_rules(networks.TORSOS),
}

# A recurrent core's fields, shared with PPO.
CORE_RULES = {"core": checks.one_of(*networks.CORES), "core_size": checks.at_least(1)}

RULES = {
    **TORSO_RULES,
    **checks.optimizer_rules(base.OPTIMIZERS),
    "gae_lambda": checks.FRACTION,
    "use_critic": checks.FLAG,
    "value_coef": checks.NONNEGATIVE,
    "entropy_coef": checks.NONNEGATIVE,
    "entropy_decay_steps": checks.at_least(0),
    "entropy_coef_final": checks.NONNEGATIVE,
    "normalize_advantages": checks.FLAG,
    "record_value": checks.FLAG,
    "normalize_observations": checks.FLAG,
    "vtrace": checks.FLAG,
    "clip_rho_threshold": checks.POSITIVE,
    "clip_pg_rho_threshold": checks.POSITIVE,
    **CORE_RULES,
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
    init = base.make_init(net, optimizer, obs_shape, with_target=False)
    if config.normalize_observations:
        update_impl = base.observing(update_impl)
    update = jax.jit(functools.partial(update_impl, net, optimizer, config))
    policy, greedy, value, probs = make_policy_fns(net, base.records_value(config))
    return base.Agent(
        init=init,
        update=update,
        policy=policy,
        greedy=greedy,
        value=value,
        epsilon=base.zero_epsilon,
        network=net,
        config=config,
        valued=base.ValuedPolicy("sampling", probs) if config.has_critic else None,
    )
