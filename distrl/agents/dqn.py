"""Stage 3 of the data flow: DQN (and tabular Q-learning) as pure functions.

Batch: `QTransition` [N] from replay, already n-step (see `distrl.agents.nstep`):
`discount` is the full bootstrap multiplier, so the loss never applies gamma again.
Tabular Q-learning is this agent with `network="table"` (and SGD, L2 loss).
"""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import optax
import rlax

from distrl import networks, spaces
from distrl.agents import base, checks
from distrl.agents.nstep import concat_tail, n_step_transitions, tail  # noqa: F401
from distrl.types import QTransition


@dataclasses.dataclass(frozen=True)
class DQNConfig:
    """DQN settings; the defaults solve the non-slippery 4x4 map.

    Every field is a setting of the experiment config's `agent` section
    (`--config.agent.<field>=`); `RULES` below says what each accepts.
    """

    ACTION_SPACES = (spaces.Discrete,)  # what it acts in (checks.check_action_space)

    network: str = "mlp"  # Q-network: "mlp" (hidden_sizes) | "table" (tabular Q-learning)
    hidden_sizes: tuple[int, ...] = (64, 64)  # MLP hidden layer widths, in units
    activation: str = "relu"  # MLP nonlinearity: "relu" | "tanh" | "elu"
    torso: str = "auto"  # "mlp" | "conv" (Conv2D layers, then the MLP) | "auto": conv on
    # image observations [H, W, C] (MinAtar's 10x10xC), the MLP on any other shape
    conv_channels: tuple[int, ...] = (16,)  # conv torso: output channels of each Conv2D layer
    conv_kernel: int = 3  # conv torso: square kernel side of every Conv2D layer, in pixels
    optimizer: str = "adam"  # "adam" | "sgd"
    learning_rate: float = 1e-2  # optimizer step size (per update)
    learning_rate_decay_steps: int = 0  # updates of linear decay to learning_rate_final; 0: none
    learning_rate_final: float = 0.0  # the step size after the decay
    max_grad_norm: float = 10.0  # global-norm gradient clip; <= 0 disables
    discount: float = 0.9  # gamma per env step (also for the n-step writer); 0.99 leaves a
    # 1% gap between moving and bumping a wall, which approximation noise can flip for good
    n_step: int = 1  # env steps summed into one return before bootstrapping (the writer's)
    double_q: bool = True  # rlax.double_q_learning, else rlax.q_learning
    loss: str = "huber"  # TD loss: "huber" | "l2"
    huber_delta: float = 1.0  # TD error (return units) where the Huber loss turns linear
    target_update_period: int = 25  # learner updates between target refreshes
    target_update_tau: float = 1.0  # fraction moved at a refresh: 1 hard copy, < 1 Polyak
    epsilon_init: float = 1.0  # exploration probability at env step 0
    epsilon_final: float = 0.1  # exploration probability after the decay
    epsilon_decay_steps: int = 2_000  # env steps (all actors together) of linear decay

    def __post_init__(self):
        base.freeze_sequences(self)
        checks.check(self, RULES)
        if self.network == "table" and self.torso == "conv":
            raise ValueError("torso='conv'; need network='mlp' (the table has no torso)")

    @property
    def pipeline(self) -> base.PipelineKind:
        """Sampled n-step transitions from a replay table."""
        return base.PipelineKind.REPLAY


RULES = {
    "network": checks.one_of("mlp", "table"),
    "hidden_sizes": checks.SIZES,
    "activation": checks.one_of(*networks.ACTIVATIONS),
    **checks.torso_rules(networks.TORSOS),
    **checks.optimizer_rules(base.OPTIMIZERS),
    "n_step": checks.at_least(1),
    "double_q": checks.FLAG,
    "loss": checks.one_of("huber", "l2"),
    "huber_delta": checks.POSITIVE,
    "target_update_period": checks.at_least(1),
    "target_update_tau": checks.OPEN_FRACTION,
    "epsilon_init": checks.FRACTION,
    "epsilon_final": checks.FRACTION,
    "epsilon_decay_steps": checks.at_least(1),
}


def td_error(network, params, target_params, transition: QTransition, double_q: bool):
    """(TD error [], the online Q of the taken action []) for ONE transition (obs [O],
    action [], reward [], discount [])."""
    q_tm1 = network.apply(params, transition.observation)  # [A]
    q_t_value = network.apply(target_params, transition.next_observation)  # [A]
    taken = q_tm1[transition.action]
    if double_q:
        q_t_selector = network.apply(params, transition.next_observation)  # [A]
        return rlax.double_q_learning(
            q_tm1,
            transition.action,
            transition.reward,
            transition.discount,
            q_t_value,
            q_t_selector,
        ), taken
    return rlax.q_learning(
        q_tm1, transition.action, transition.reward, transition.discount, q_t_value
    ), taken


def loss_fn(network, config: DQNConfig, params, target_params, batch: QTransition, weights=None):
    """Weighted mean Huber / L2 TD loss over a batch [N]; returns (loss, metrics).

    weights: [N] importance-sampling weights of prioritized replay (None: all 1).
    metrics holds scalars and `priorities` [N] = |TD| (no gradient), the new
    priorities of the batch's transitions. `q_taken` (the mean online Q of the taken
    actions) and `terminal_frac` (the batch's share of terminal transitions, discount
    0) show a TD burst: a terminal's TD error is about Q itself (issue 37 item 5).
    """
    td, q_taken = jax.vmap(td_error, in_axes=(None, None, None, 0, None))(
        network, params, target_params, batch, config.double_q
    )  # [N] each
    if config.loss == "huber":
        losses = rlax.huber_loss(td, config.huber_delta)
    elif config.loss == "l2":
        losses = rlax.l2_loss(td)  # 0.5 * td**2
    else:
        raise ValueError(f"unknown loss {config.loss!r}; use 'huber' or 'l2'")
    if weights is not None:
        losses = losses * weights
    loss = jnp.mean(losses)
    td_abs = jnp.abs(jax.lax.stop_gradient(td))
    metrics = {"loss": loss, "td_abs": jnp.mean(td_abs), "priorities": td_abs}
    metrics["q_taken"] = jnp.mean(jax.lax.stop_gradient(q_taken))
    metrics["terminal_frac"] = jnp.mean((batch.discount == 0).astype(jnp.float32))
    return loss, metrics


def update_target(config: DQNConfig, params, target_params, step):
    """Every `target_update_period` updates: target <- tau*online + (1-tau)*target."""
    due = (step % config.target_update_period) == 0
    tau = jnp.where(due, config.target_update_tau, 0.0)
    return optax.incremental_update(params, target_params, tau)


def _update(
    net, optimizer, config: DQNConfig, state: base.TrainingState, batch: QTransition, weights=None
):
    """One gradient step and target refresh: (state, batch [N], weights [N] | None) ->
    (state, metrics), metrics with `priorities` [N] (see `loss_fn`)."""
    grads, metrics = jax.grad(loss_fn, argnums=2, has_aux=True)(
        net, config, state.params, state.target_params, batch, weights
    )
    updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    step = state.step + 1
    target_params = update_target(config, params, state.target_params, step)
    metrics["grad_norm"] = base.global_norm(grads)
    return base.TrainingState(params, target_params, opt_state, state.key, step), metrics


def make_agent(config: DQNConfig, env_spec) -> base.Agent:
    """Builds the DQN agent for an env spec (`base.EnvSpec` or the env's)."""
    obs_shape = base.observation_shape(env_spec)
    torso = networks.torso_of(config, obs_shape)
    net = networks.make_dqn_network(config.network, torso, env_spec.num_actions)
    optimizer = base.optimizer_of(config)
    epsilon_fn = optax.linear_schedule(
        config.epsilon_init, config.epsilon_final, config.epsilon_decay_steps
    )
    init = base.make_init(net, optimizer, obs_shape, with_target=True)
    update = jax.jit(functools.partial(_update, net, optimizer, config))

    def policy(params, key, observations, epsilon):
        """Epsilon-greedy: obs [B, O] -> (actions [B] int32, {}) (no extras on purpose)."""
        q = net.apply(params, observations)  # [B, A]
        return base.epsilon_greedy(key, q, epsilon), {}

    def greedy(params, observations):
        return base.argmax_actions(net.apply(params, observations))

    def value(params, observations):
        return jnp.max(net.apply(params, observations), axis=-1)

    def greedy_probs(params, observations):
        """One-hot greedy actions [B, A]: Q-learning's target max_a Q is the greedy
        policy's value, whatever epsilon the actors explore with."""
        return jax.nn.one_hot(greedy(params, observations), env_spec.num_actions)

    return base.Agent(
        init=init,
        update=update,
        policy=policy,
        greedy=greedy,
        value=value,
        epsilon=epsilon_fn,
        network=net,
        config=config,
        valued=base.ValuedPolicy("greedy", greedy_probs),
    )
