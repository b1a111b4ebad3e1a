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

from distrl import networks
from distrl.agents import assembly, base, checks, settings
from distrl.agents.nstep import concat_tail, n_step_transitions, tail  # noqa: F401
from distrl.agents.rlax_import import rlax
from distrl.types import QTransition


@dataclasses.dataclass(frozen=True, kw_only=True)
class DQNConfig(settings.QLearningFields):
    """DQN's settings, its defaults solve the non-slippery 4x4 map: the fields of
    `settings.QLearningFields` (what they mean, what it sets here) and its own;
    `RULES` below says what each accepts."""

    network: str = "mlp"  # Q-network: "mlp" (hidden_sizes) | "table" (tabular Q-learning)
    hidden_sizes: tuple[int, ...] = (64, 64)
    learning_rate: float = 1e-2
    discount: float = 0.9  # 0.99 leaves a 1% gap between moving and bumping a wall, which
    # approximation noise can flip for good
    n_step: int = 1
    double_q: bool = True  # double Q-learning's target (the online network picks the
    # bootstrap action, the target network values it), else Q-learning's max
    loss: str = "huber"
    target_update_period: int = 25
    epsilon_final: float = 0.1
    epsilon_decay_steps: int = 2_000

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
    **settings.Q_LEARNING_RULES,
    "network": checks.one_of("mlp", "table"),
    "double_q": checks.FLAG,
}


def td_error(network, params, target_params, batch: QTransition, double_q: bool):
    """(TD errors [N], the online Q of the taken actions [N]) of a batch [N] (obs [N, O],
    action [N], reward [N], discount [N]): rlax's `double_q_learning` (the online
    network picks the bootstrap action, the target network values it) or `q_learning`
    (the target's max), computed on the whole batch. Actions are selected by one-hot
    products (`base.select_actions`): rlax's per-example indexing, vmapped, compiles to
    a gather (and a scatter in the gradient) that a TPU runs element by element."""
    q_tm1 = network.apply(params, batch.observation)  # [N, A]
    q_t_value = network.apply(target_params, batch.next_observation)  # [N, A]
    taken = base.select_actions(q_tm1, batch.action)  # [N]
    if double_q:
        q_t_selector = network.apply(params, batch.next_observation)  # [N, A]
        bootstrap = base.select_actions(q_t_value, base.argmax_actions(q_t_selector))
    else:
        bootstrap = jnp.max(q_t_value, axis=-1)
    target = jax.lax.stop_gradient(batch.reward + batch.discount * bootstrap)  # [N]
    return target - taken, taken


def loss_fn(network, config: DQNConfig, params, target_params, batch: QTransition, weights=None):
    """Weighted mean Huber / L2 TD loss over a batch [N]; returns (loss, metrics).

    weights: [N] importance-sampling weights of prioritized replay (None: all 1).
    metrics holds scalars and `priorities` [N] = |TD| (no gradient), the new
    priorities of the batch's transitions. `q_taken` (the mean online Q of the taken
    actions) and `terminal_frac` (the batch's share of terminal transitions, discount
    0) show a TD burst: a terminal's TD error is about Q itself (docs/decisions.md,
    "CartPole's presets decay their step size to 0, and DQN's takes an L2 loss").
    """
    td, q_taken = td_error(network, params, target_params, batch, config.double_q)  # [N] each
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


def epsilon_schedule(config: settings.QLearningFields):
    """env steps -> [] exploration probability: epsilon_init, decayed linearly to
    epsilon_final over epsilon_decay_steps (DQN's and R2D2's actors)."""
    return optax.linear_schedule(
        config.epsilon_init, config.epsilon_final, config.epsilon_decay_steps
    )


def make_agent(config: DQNConfig, env_spec) -> base.Agent:
    """Builds the DQN agent for an env spec (`base.EnvSpec` or the env's)."""
    obs_shape = base.observation_shape(env_spec)
    torso = networks.torso_of(config, obs_shape)
    net = networks.make_dqn_network(config.network, torso, env_spec.num_actions)
    optimizer = base.optimizer_of(config)
    init = base.make_init(net, optimizer, obs_shape, with_target=True)

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

    return assembly.assemble(
        config,
        net,
        init,
        functools.partial(_update, net, optimizer, config),
        (policy, greedy, value),
        epsilon_schedule(config),
        base.ValuedPolicy("greedy", greedy_probs),
    )
