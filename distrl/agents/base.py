"""Stage 3 of the data flow, shared parts: the Agent interface and small helpers.

An agent is a bundle of pure functions (see `Agent`); learners call `update`,
actors and evaluators call `policy`, `greedy` and `value`. This package imports
only jax, haiku, optax, rlax and numpy so that it runs anywhere (see ../shared/STACK.md).
"""

import dataclasses
import enum
from collections.abc import Callable
from typing import Any, NamedTuple

import haiku as hk
import jax
import jax.numpy as jnp
import optax
from jax.flatten_util import ravel_pytree

from distrl import spaces

Params = Any
OPTIMIZERS = ("adam", "sgd")
Metrics = dict[str, jnp.ndarray]


class PipelineKind(enum.Enum):
    """How an agent's data travels from actors to its update: one value per agent config,
    its `pipeline` property (the only place that decides it). `distrl.pipelines.of`
    gives the object that implements it; every stage asks that object.

    REPLAY: n-step `QTransition`s sampled from a replay table; a batch is QTransition [N]
      (DQN, tabular Q).
    CHUNKS: rollout chunks `Transition` [T, B] through an on-policy queue; a batch is
      Transition [T, N] (A2C, V-trace, PPO).
    EPISODES: as CHUNKS, but each item is the window of the last W chunks [W*T, B]
      with `extras["owned"]` marking whole episodes (`agents.episodes`): REINFORCE, GRPO.
    SEQUENCES: overlapping sequences of one env with a recurrent core's state at their
      first step, sampled from a replay table; a batch is `CoreChunk` [L, N] (R2D2).
    """

    REPLAY = "replay"
    CHUNKS = "chunks"
    EPISODES = "episodes"
    SEQUENCES = "sequences"


class EnvSpec(NamedTuple):
    """What an agent needs to know about the env (an env's `distrl.envs.EnvSpec` fits too)."""

    obs_size: int  # elements of one observation (the network flattens it to this width)
    num_actions: int
    observation_shape: tuple | None = None  # of one observation; None: (obs_size,)
    action_space: spaces.Box | spaces.Discrete | None = None  # None: Discrete(num_actions)


def observation_shape(env_spec) -> tuple:
    """The shape of one observation the agent's network takes."""
    return tuple(env_spec.observation_shape or (env_spec.obs_size,))


def action_space(env_spec) -> spaces.Box | spaces.Discrete:
    """The space the agent acts in: the spec's `action_space`, else Discrete(num_actions)."""
    space = getattr(env_spec, "action_space", None)
    return spaces.Discrete(env_spec.num_actions) if space is None else space


class TrainingState(NamedTuple):
    """Learner state for every agent; `target_params` is None for AC/PPO."""

    params: Params
    target_params: Params
    opt_state: optax.OptState
    key: jax.Array
    step: jnp.ndarray  # int32 [], updates applied so far


class ValuedPolicy(NamedTuple):
    """The policy whose value `Agent.value` estimates: the one its exact value is for.

    name: "greedy" (Q-learning: max_a Q is the greedy policy's value) or "sampling"
      (a critic: V is the value of the softmax policy the actors sample from).
    probs: (params, observations [B, O]) -> action probabilities [B, A].
    """

    name: str
    probs: Callable


class Agent(NamedTuple):
    """The pure functions an algorithm exposes (see WORKSPACE.md).

    init: (key) -> TrainingState.
    update: (TrainingState, batch) -> (TrainingState, metrics); one jax.jit. metrics are
      scalars, except DQN's `priorities` [N] (|TD| per transition, for prioritized
      replay), whose update also takes `weights` [N] (importance sampling).
    policy: (params, key, observations [B, *obs_shape], epsilon []) -> (actions [B] int32,
      extras).
    greedy: (params, observations [B, *obs_shape]) -> actions [B] int32.
    value: (params, observations [B, *obs_shape]) -> values [B] (max_a Q or V).
    epsilon: (env_steps) -> [] exploration rate (0 for policy-gradient agents).
    network: the hk.Transformed network (apply(params, obs)).
    config: the algorithm's config dataclass; `config.pipeline` says which batches
      `update` takes (`PipelineKind`).
    valued: the `ValuedPolicy` whose value `value` estimates; None when no value is
      learned (REINFORCE, GRPO: no critic, so `value` is an untrained head) or the
      policy is recurrent (not a function of the observation alone).
    core: a recurrent agent's `agents.recurrent.Core` (acting with its state; `policy`,
      `greedy` and `value` then act from a fresh episode's state); None: feed-forward.
    update_many: (TrainingState, batches [K, ...], weights [K, N] | None) ->
      (TrainingState, metrics [K, ...]): K `update`s in one jitted `lax.scan`, update k
      on batches[k] (`assembly.scan_updates`), as K calls in a row; on an accelerator,
      K small updates per call instead of one. None only in an Agent built by hand.
    """

    init: Callable
    update: Callable
    policy: Callable
    greedy: Callable
    value: Callable
    epsilon: Callable
    network: hk.Transformed
    config: Any
    valued: ValuedPolicy | None = None
    core: Any = None
    update_many: Callable | None = None


def records_value(config) -> bool:
    """Whether the actors record V(s) in each step's extras ("value"), beside the sampled
    action's "log_prob": for PPO's clipped value loss (`clip_value`), its one reader, or
    when asked (`record_value`, which runs saved before it had: `config.ADDED_LATER_TO_AGENTS`).
    Otherwise acting skips the critic (docs/decisions.md, "On-policy items are whole
    `[T, B]` chunks"). `config`: the agent's dataclass or the experiment config's `agent`
    section."""
    return bool(getattr(config, "record_value", False) or getattr(config, "clip_value", False))


def make_init(net: hk.Transformed, optimizer, obs_shape: tuple, with_target: bool) -> Callable:
    """Jitted `init(key) -> TrainingState` (target_params = params if with_target)."""

    @jax.jit
    def init(key):
        key, init_key = jax.random.split(key)
        params = net.init(init_key, jnp.zeros(obs_shape, jnp.float32))
        target = params if with_target else None
        return TrainingState(params, target, optimizer.init(params), key, jnp.zeros((), jnp.int32))

    return init


def make_optimizer(
    learning_rate: float,
    max_grad_norm: float,
    optimizer: str = "adam",
    decay_steps: int = 0,
    final_learning_rate: float = 0.0,
) -> optax.GradientTransformation:
    """Global-norm gradient clipping followed by Adam or plain SGD.

    decay_steps > 0: the learning rate falls linearly to `final_learning_rate` over
    that many optimizer steps (PPO takes epochs x minibatches of them per update),
    then stays there; a policy that has found the optimum stops being shaken off it.

    Wrapped in `optax.flatten` (the optimizer state is one flat vector): on XLA:CPU
    this cuts the compile time of an update several-fold and changes no numbers.
    """
    if decay_steps and decay_steps > 0:
        learning_rate = optax.linear_schedule(learning_rate, final_learning_rate, decay_steps)
    if optimizer == "adam":
        opt = optax.adam(learning_rate)
    elif optimizer == "sgd":
        opt = optax.sgd(learning_rate)
    else:
        raise ValueError(f"unknown optimizer {optimizer!r}; use 'adam' or 'sgd'")
    if max_grad_norm and max_grad_norm > 0:
        opt = optax.chain(optax.clip_by_global_norm(max_grad_norm), opt)
    return optax.flatten(opt)


def optimizer_of(config) -> optax.GradientTransformation:
    """`make_optimizer` from an agent config's optimizer fields (`settings.LearningFields`)."""
    return make_optimizer(
        config.learning_rate,
        config.max_grad_norm,
        config.optimizer,
        config.learning_rate_decay_steps,
        config.learning_rate_final,
    )


def global_norm(tree) -> jnp.ndarray:
    """L2 norm of a pytree, through one flat vector.

    Same value as `optax.global_norm`, whose per-leaf reduction adds seconds of
    XLA:CPU compile time to a small update.
    """
    return jnp.linalg.norm(ravel_pytree(tree)[0])


def freeze_sequences(config) -> None:
    """Turns list fields into tuples in a frozen dataclass (__post_init__ helper).

    Configs arrive as `Config(**config_dict)` from ml_collections, where sizes may be
    lists; tuples keep the dataclass hashable.
    """
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        if isinstance(value, list):
            object.__setattr__(config, field.name, tuple(value))


def sample_categorical(key: jax.Array, logits: jnp.ndarray):
    """Samples actions [B] int32 from logits [B, A]; returns (actions, log_probs [B]).

    Inverse-CDF sampling from one uniform per row: the same distribution as
    `jax.random.categorical`, but its one small random draw compiles several
    times faster on XLA:CPU than the Gumbel draw of shape [B, A].
    """
    u = jax.random.uniform(key, logits.shape[:-1])  # [B]
    cdf = jnp.cumsum(jax.nn.softmax(logits, axis=-1), axis=-1)  # [B, A]
    actions = jnp.sum(cdf < u[..., None], axis=-1)
    actions = jnp.minimum(actions, logits.shape[-1] - 1).astype(
        jnp.int32
    )  # cdf[-1] < 1 by rounding
    return actions, action_log_probs(logits, actions)


def epsilon_greedy(key: jax.Array, preferences: jnp.ndarray, epsilon) -> jnp.ndarray:
    """Epsilon-greedy actions [B] int32 from preferences [B, A], one uniform per row.

    With u ~ U[0, 1): explore when u < epsilon, and then u / epsilon is again
    uniform, so floor(A * u / epsilon) is a uniform random action.
    """
    num_actions = preferences.shape[-1]
    u = jax.random.uniform(key, preferences.shape[:-1])  # [B]
    explore = u < epsilon
    scaled = jnp.where(explore, u / jnp.maximum(epsilon, 1e-12), 0.0)
    random_actions = jnp.minimum(jnp.floor(scaled * num_actions), num_actions - 1)
    return jnp.where(explore, random_actions.astype(jnp.int32), argmax_actions(preferences))


def action_log_probs(logits: jnp.ndarray, actions: jnp.ndarray) -> jnp.ndarray:
    """log pi(a|s): logits [..., A], actions [...] -> [...]."""
    log_pi = jax.nn.log_softmax(logits, axis=-1)
    return jnp.take_along_axis(log_pi, actions[..., None].astype(jnp.int32), axis=-1)[..., 0]


def entropy(logits: jnp.ndarray) -> jnp.ndarray:
    """Entropy of softmax(logits) [..., A] -> [...] (lighter to compile than distrax)."""
    log_pi = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.sum(jnp.exp(log_pi) * log_pi, axis=-1)


def select_actions(values: jnp.ndarray, actions: jnp.ndarray) -> jnp.ndarray:
    """values[..., a] of the actions [...] (int) from values [..., A] -> [...], as a
    one-hot product summed over A: the same numbers and gradient as indexing, with no
    gather (nor scatter in the gradient), which TPUs run one element at a time."""
    one_hot = jax.nn.one_hot(actions, values.shape[-1], dtype=values.dtype)
    return jnp.sum(values * one_hot, axis=-1)


def argmax_actions(values: jnp.ndarray) -> jnp.ndarray:
    """Greedy actions [...] int32 from preferences [..., A] (ties -> lowest index)."""
    return jnp.argmax(values, axis=-1).astype(jnp.int32)


def zero_epsilon(env_steps) -> jnp.ndarray:
    """Exploration schedule of policy-gradient agents: always 0."""
    del env_steps
    return jnp.zeros((), jnp.float32)
