"""R2D2 (Kapturowski et al., 2019) as pure functions: a recurrent Q network learned
from stored sequences.

Batch: a `types.CoreChunk` of `Transition` [L, N] (N sequences of L steps, time-major,
as `pipelines.sequences` reads them) and the core's state at each sequence's first
step, leaves [1, N, H]. Each sequence (`batch_td`: the networks unroll all N at once):
- burn-in: its first `burn_in` steps only warm the stored state (no gradient through
  them, no loss on them);
- the online network unrolls the rest from the warmed state, the target network the
  whole sequence from the stored one, each state reset after an episode end as the
  actor reset it (`networks.RecurrentNet.unroll`: the numbers of `recurrent.unroll`);
- n-step double-Q targets with value rescaling h (`rlax.signed_hyperbolic`, h^-1
  `rlax.signed_parabolic`): y_t = h(R_t + D_t h^-1(Q_target(s', argmax_a Q(s', a)))),
  with R_t, D_t and s' the n-step window of `nstep.n_step_transitions` (it stops at
  an episode end; a truncated one bootstraps from its last observation), for each
  step after the burn-in whose n steps lie inside the sequence (L - burn_in - n + 1);
- its priority: eta max_t |td_t| + (1 - eta) mean_t |td_t|.
rlax's `transformed_n_step_q_learning` is not used: its windows run on across an
episode end (a truncation would bootstrap from the next episode).
"""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import optax

from distrl import networks
from distrl.agents import assembly, base, checks, dqn, nstep, recurrent, settings
from distrl.agents.rlax_import import rlax
from distrl.types import CoreChunk, Transition


@dataclasses.dataclass(frozen=True, kw_only=True)
class R2D2Config(settings.QLearningFields):
    """R2D2's settings: the torso, a GRU core and a Q head, learned from sequences of
    `replay.sequence_length` steps (`pipelines.sequences`); the fields of
    `settings.QLearningFields` (what they mean, what it sets here) and its own."""

    hidden_sizes: tuple[int, ...] = (64,)
    core: str = "gru"  # the recurrent core after the torso (R2D2 always has one)
    core_size: int = 64  # the GRU's width
    learning_rate: float = 1e-3
    discount: float = 0.99
    n_step: int = 5
    burn_in: int = 8  # steps at each sequence's start that only warm the core's state
    value_rescaling: bool = True  # learn h(Q), h(x) = sign(x)(sqrt(|x| + 1) - 1) + eps x
    rescaling_epsilon: float = 1e-3  # eps of h
    loss: str = "l2"  # R2D2's
    priority_eta: float = 0.9  # a sequence's priority: eta max|td| + (1 - eta) mean|td|
    target_update_period: int = 100
    epsilon_final: float = 0.05
    epsilon_decay_steps: int = 20_000

    def __post_init__(self):
        base.freeze_sequences(self)
        checks.check(self, RULES)

    @property
    def pipeline(self) -> base.PipelineKind:
        """Sampled sequences with the core's state at their first step."""
        return base.PipelineKind.SEQUENCES


RULES = {
    **settings.Q_LEARNING_RULES,
    "core": checks.one_of("gru"),
    "core_size": checks.at_least(1),
    "burn_in": checks.at_least(0),
    "value_rescaling": checks.FLAG,
    "rescaling_epsilon": checks.POSITIVE,
    "priority_eta": checks.FRACTION,
}


def learned_steps(sequence_length: int, burn_in: int, n_step: int) -> int:
    """Steps of a sequence with a loss: after the burn-in, with n steps inside it."""
    return sequence_length - burn_in - n_step + 1


def rescale(config: R2D2Config, x):
    """h(x), or x without value rescaling."""
    return rlax.signed_hyperbolic(x, config.rescaling_epsilon) if config.value_rescaling else x


def unscale(config: R2D2Config, x):
    """h^-1(x), or x without value rescaling."""
    return rlax.signed_parabolic(x, config.rescaling_epsilon) if config.value_rescaling else x


def n_step_targets(config: R2D2Config, seq: Transition, bootstrap):
    """y [K]: h(R + D h^-1(bootstrap at the window's last step)) for the K = M - n + 1
    windows of `seq` [M] (its steps after the burn-in); bootstrap [M] is each step's
    target value of its next observation (rescaled units)."""
    values = Transition(
        seq.observation, seq.action, seq.reward, seq.discount, seq.last, bootstrap, {}
    )
    windows = nstep.n_step_transitions(values, config.n_step, config.discount)
    # the n-step machinery carries the value of the window's last next observation
    return rescale(
        config, windows.reward + windows.discount * unscale(config, windows.next_observation)
    )


def batch_td(net, config: R2D2Config, params, target_params, chunk: Transition, start):
    """(td [N, K], the online Q of the taken actions [N, K]) of N sequences `chunk` [L, N]
    from their stored core states `start` (leaves [N, H]); K = `learned_steps`. The
    networks unroll the whole batch (`recurrent.unroll_of`), then each sequence's
    targets are its own (`_td`, vmapped over N)."""
    unroll = recurrent.unroll_of(net)
    b = config.burn_in
    head = jax.tree.map(lambda x: x[:b], chunk)
    rest = jax.tree.map(lambda x: x[b:], chunk)
    # burn-in: the stored state warmed by the online network, no gradient through it
    state = unroll(params, start, head.observation, head.last)[0] if b else start
    state = jax.lax.stop_gradient(state)
    _, q, q_next = unroll(params, state, rest.observation, rest.last, rest.next_observation)
    _, _, q_next_target = unroll(
        target_params, start, chunk.observation, chunk.last, chunk.next_observation
    )  # [L, N, A]
    return jax.vmap(functools.partial(_td, config), in_axes=1)(rest, q, q_next, q_next_target[b:])


def _td(config: R2D2Config, rest: Transition, q, q_next, q_next_target):
    """One sequence's (td [K], taken [K]) from its steps after the burn-in [M] and the
    online Q of their observations, of their next observations, and the target's of
    those [M, A]."""
    selected = jnp.argmax(jax.lax.stop_gradient(q_next), axis=-1)  # double Q: online picks
    bootstrap = base.select_actions(q_next_target, selected)  # [M], no gather (dqn.td_error)
    targets = jax.lax.stop_gradient(n_step_targets(config, rest, bootstrap))  # [K]
    k = targets.shape[0]
    taken = base.select_actions(q[:k], rest.action[:k])
    return targets - taken, taken


def sequence_td(net, config: R2D2Config, params, target_params, seq: Transition, start):
    """`batch_td` of ONE sequence `seq` [L] from its stored core state `start` (leaves
    [H]): (td [K], taken [K])."""
    td, taken = batch_td(
        net,
        config,
        params,
        target_params,
        jax.tree.map(lambda x: jnp.asarray(x)[:, None], seq),
        jax.tree.map(lambda x: jnp.asarray(x)[None], start),
    )
    return td[0], taken[0]


def priorities(td_abs, eta: float):
    """R2D2's sequence priority from |td| [..., K]: eta max + (1 - eta) mean -> [...]."""
    return eta * jnp.max(td_abs, axis=-1) + (1.0 - eta) * jnp.mean(td_abs, axis=-1)


def loss_fn(net, config: R2D2Config, params, target_params, batch: CoreChunk, weights=None):
    """Weighted mean over N sequences of each one's mean TD loss; (loss, metrics), metrics
    with `priorities` [N] (no gradient). weights: [N] importance weights (None: all 1)."""
    start = jax.tree.map(lambda x: x[0], batch.core_state)  # [N, H]
    td, taken = batch_td(net, config, params, target_params, batch.chunk, start)  # [N, K]
    huber = config.loss == "huber"
    losses = rlax.huber_loss(td, config.huber_delta) if huber else rlax.l2_loss(td)
    per_sequence = jnp.mean(losses, axis=1)
    if weights is not None:
        per_sequence = per_sequence * weights
    loss = jnp.mean(per_sequence)
    td_abs = jnp.abs(jax.lax.stop_gradient(td))
    metrics = {
        "loss": loss,
        "td_abs": jnp.mean(td_abs),
        "priorities": priorities(td_abs, config.priority_eta),
        "q_taken": jnp.mean(jax.lax.stop_gradient(taken)),
    }
    return loss, metrics


def _update(net, optimizer, config: R2D2Config, state: base.TrainingState, batch, weights=None):
    """One gradient step and target refresh (as DQN's): (state, metrics)."""
    grads, metrics = jax.grad(loss_fn, argnums=2, has_aux=True)(
        net, config, state.params, state.target_params, batch, weights
    )
    updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    step = state.step + 1
    target_params = dqn.update_target(config, params, state.target_params, step)
    metrics["grad_norm"] = base.global_norm(grads)
    return base.TrainingState(params, target_params, opt_state, state.key, step), metrics


def make_agent(config: R2D2Config, env_spec) -> base.Agent:
    """The R2D2 agent: epsilon-greedy acting through its `Core` (the actor carries the
    GRU's state), the update above."""
    obs_shape = base.observation_shape(env_spec)
    net = networks.make_recurrent_q(
        networks.torso_of(config, obs_shape), env_spec.num_actions, config.core_size
    )

    def initial_state(batch_size: int):
        return networks.core_state(config.core_size, True, batch_size)

    def policy(params, key, observations, epsilon, state):
        q, state = net.apply(params, observations, state)
        return base.epsilon_greedy(key, q, epsilon), {}, state

    def greedy(params, observations, state):
        q, state = net.apply(params, observations, state)
        return base.argmax_actions(q), state

    core = recurrent.Core(initial_state, policy, greedy)
    optimizer = base.optimizer_of(config)
    return assembly.assemble(
        config,
        net,
        recurrent.make_init(net, initial_state, optimizer, obs_shape, with_target=True),
        functools.partial(_update, net, optimizer, config),
        recurrent.stateless(net, core, lambda q: jnp.max(q, axis=-1)),
        dqn.epsilon_schedule(config),
        core=core,
    )
