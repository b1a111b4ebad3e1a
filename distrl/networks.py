"""Stage 2 of the data flow: Haiku networks as pure (init, apply) pairs.

Every factory returns `hk.without_apply_rng(hk.transform(f))`, so params are plain
pytrees and `apply(params, obs)` is a pure function that the agents vmap and jit.
Inputs are observations [..., *obs_shape] of any dtype (the env's spec): the last
`obs_ndim` dims are flattened and cast to float32 first (a no-op for the gridworld's
float32 one-hot vectors [..., O]); leading dims are free. With `conv_channels` the
torso starts with Conv2D layers on image observations [..., H, W, C] (MinAtar's
10x10xC), flattened into the MLP; `torso_kind` picks conv or MLP from the config.
"""

import math
from collections.abc import Callable
from typing import NamedTuple

import haiku as hk
import jax
import jax.numpy as jnp

from distrl import spaces

ACTIVATIONS = {"relu": jax.nn.relu, "tanh": jnp.tanh, "elu": jax.nn.elu}
TORSOS = ("auto", "mlp", "conv")


def torso_kind(torso: str, obs_shape: tuple) -> str:
    """The torso a config's `torso` gives on observations of `obs_shape`: "conv" or "mlp".

    "auto" is conv for image observations [H, W, C] (rank 3), the MLP otherwise; "conv"
    on any other rank is a ValueError naming the shape.
    """
    if torso not in TORSOS:
        raise ValueError(f"unknown torso {torso!r}; pick one of {TORSOS}")
    image = len(obs_shape) == 3
    if torso == "conv" and not image:
        raise ValueError(
            f"torso='conv' needs image observations [H, W, C]; this env's observation "
            f"shape is {tuple(obs_shape)}; use torso='mlp' or 'auto'"
        )
    return "conv" if torso == "conv" or (torso == "auto" and image) else "mlp"


def conv_channels(agent_config, obs_shape: tuple) -> tuple:
    """The conv layers' channels an agent config (`torso`, `conv_channels`) gives on
    observations of `obs_shape`; () for an MLP torso."""
    conv = torso_kind(agent_config.torso, obs_shape) == "conv"
    return tuple(agent_config.conv_channels) if conv else ()


class Torso(NamedTuple):
    """What a network's torso is: hidden layer sizes, their activation, the rank of the
    observation it takes, and conv layers (channels, kernel side) before them, none
    for an MLP. One value, so each network factory takes a torso, not its six parts."""

    hidden_sizes: tuple = ()
    activation: str = "relu"
    obs_ndim: int = 1
    conv_channels: tuple = ()
    conv_kernel: int = 3
    normalize_observations: bool = False  # standardised by running statistics (`ObservationNorm`)


def torso_of(agent_config, obs_shape: tuple) -> Torso:
    """The torso an agent config (`hidden_sizes`, `activation`, `torso`, `conv_*`) gives
    on observations of `obs_shape`."""
    return Torso(
        tuple(agent_config.hidden_sizes),
        agent_config.activation,
        len(obs_shape),
        conv_channels(agent_config, obs_shape),
        agent_config.conv_kernel,
        bool(getattr(agent_config, "normalize_observations", False)),
    )


def _activation(name: str) -> Callable:
    if name not in ACTIVATIONS:
        raise ValueError(f"unknown activation {name!r}; pick one of {sorted(ACTIVATIONS)}")
    return ACTIVATIONS[name]


def _flat(obs, obs_ndim: int):
    """[..., *obs_shape] of any dtype -> float32 [..., prod(obs_shape)]."""
    obs = jnp.asarray(obs)
    lead = obs.shape[: obs.ndim - obs_ndim]
    return obs.reshape(lead + (-1,)).astype(jnp.float32)


class SameConv2D(hk.Module):
    """hk.Conv2D(channels, kernel) (stride 1, SAME padding, NHWC) as one matmul over the
    k x k shifted copies of the padded image (im2col), with hk.Conv2D's parameters
    (`w` [k, k, C, O] with its init, `b` [O] zeros), so params and outputs are the same.

    Why: XLA:CPU runs a convolution inside a `lax.scan` (PPO's minibatch loop, the
    rollout, the fused trainer) many times slower than the same convolution alone; a
    dot does not slow down there (docs/decisions.md, "The conv torso is one matmul
    (im2col), not an XLA convolution").
    """

    def __init__(self, channels: int, kernel: int, name: str | None = None):
        super().__init__(name=name)
        self.channels, self.kernel = channels, kernel

    def __call__(self, x):
        k, c = self.kernel, x.shape[-1]
        w = hk.get_parameter(
            "w",
            (k, k, c, self.channels),
            x.dtype,
            hk.initializers.TruncatedNormal(1.0 / math.sqrt(k * k * c)),
        )
        b = hk.get_parameter("b", (self.channels,), x.dtype, jnp.zeros)
        h, wd = x.shape[-3], x.shape[-2]
        lo, hi = (k - 1) // 2, k // 2  # SAME padding, as XLA pads an even kernel
        padded = jnp.pad(x, ((0, 0), (lo, hi), (lo, hi), (0, 0)))
        cols = jnp.concatenate(
            [padded[:, i : i + h, j : j + wd, :] for i in range(k) for j in range(k)], axis=-1
        )  # [N, H, W, k*k*C], in w's (row, column, channel) order
        return cols @ w.reshape(k * k * c, self.channels) + b


OBS_NORM = "observation_norm"  # the params entry of the running observation statistics
OBS_CLIP = 10.0  # standardised observations are clipped to +-this (SB3's VecNormalize's)


class ObservationNorm(hk.Module):
    """obs [..., *obs_shape] standardised, (obs - mean) / sqrt(var + 1e-8) clipped to
    +-OBS_CLIP, by running statistics kept in the params (`OBS_NORM`: mean and var
    [*obs_shape], count []), from mean 0, var 1. No gradient moves them: the learner
    merges each batch's observations into them after its gradient steps (`observe`), so
    the actors, the evaluator and the saved policy use the learner's statistics of
    that params version (the role of SB3's VecNormalize, for observations)."""

    def __init__(self, obs_ndim: int):
        super().__init__(name=OBS_NORM)
        self.obs_ndim = obs_ndim

    def __call__(self, obs):
        obs = jnp.asarray(obs).astype(jnp.float32)
        shape = obs.shape[obs.ndim - self.obs_ndim :]
        mean = hk.get_parameter("mean", shape, init=jnp.zeros)
        var = hk.get_parameter("var", shape, init=jnp.ones)
        hk.get_parameter("count", (), init=jnp.zeros)
        mean, var = jax.lax.stop_gradient((mean, var))
        return jnp.clip((obs - mean) / jnp.sqrt(var + 1e-8), -OBS_CLIP, OBS_CLIP)


def observe(params, observations):
    """`params` with the running observation statistics (`ObservationNorm`) merged with
    a batch of observations [..., *obs_shape] (the parallel update of mean and variance
    of Chan et al.); params without them are returned as they are."""
    if OBS_NORM not in params:
        return params
    stats = params[OBS_NORM]
    x = jnp.asarray(observations).astype(jnp.float32).reshape((-1, *stats["mean"].shape))
    n, count = x.shape[0], stats["count"]
    total = count + n
    delta = jnp.mean(x, axis=0) - stats["mean"]
    m2 = stats["var"] * count + jnp.var(x, axis=0) * n + jnp.square(delta) * count * n / total
    merged = {"mean": stats["mean"] + delta * n / total, "var": m2 / total, "count": total}
    return {**params, OBS_NORM: merged}


def _input(torso: Torso, obs):
    """What the torsos take: the observation, standardised where the torso says so."""
    return ObservationNorm(torso.obs_ndim)(obs) if torso.normalize_observations else obs


def _torso(torso: Torso, name: str) -> Callable:
    """obs [..., *obs_shape] -> features [..., width].

    Conv2D+activation layers (`<name>_conv_<i>`, stride 1, SAME padding: the image
    keeps its H x W) when `conv_channels` is not empty, then flattened into a
    Linear+activation stack (layers `<name>_<i>`); no layers at all: the flat obs.
    """
    hidden_sizes, activation, obs_ndim, conv_channels, conv_kernel, _ = torso
    layers = []
    for i, size in enumerate(hidden_sizes):
        layers += [hk.Linear(size, name=f"{name}_{i}"), _activation(activation)]
    mlp = hk.Sequential(layers)
    if not conv_channels:
        return lambda obs: mlp(_flat(obs, obs_ndim))
    if obs_ndim != 3:
        raise ValueError(f"a conv torso needs [H, W, C] observations, got rank {obs_ndim}")
    convs = []
    for i, channels in enumerate(conv_channels):
        convs += [
            SameConv2D(channels, conv_kernel, name=f"{name}_conv_{i}"),
            _activation(activation),
        ]
    conv = hk.Sequential(convs)

    def forward(obs):
        obs = jnp.asarray(obs).astype(jnp.float32)
        lead, image = obs.shape[:-3], obs.shape[-3:]
        # hk.Conv2D takes one batch dim: fold the leading dims into it and back.
        h = conv(obs.reshape((-1, *image)))
        return mlp(h.reshape(lead + (-1,)))

    return forward


def make_q_network(torso: Torso, num_actions: int) -> hk.Transformed:
    """(Conv and) MLP torso with a Q head: apply(params, obs [..., *obs_shape]) -> q [..., A]."""

    def forward(obs):
        h = _torso(torso, "torso")(obs)
        return hk.Linear(num_actions, name="q_head")(h)

    return hk.without_apply_rng(hk.transform(forward))


def make_table_network(num_actions: int, obs_ndim: int = 1) -> hk.Transformed:
    """Tabular Q: one bias-free linear layer on the one-hot obs, zero-initialised.

    apply(params, obs [..., O]) -> q [..., A]; params['table']['w'] is the Q table
    [O, A], so DQN with this network and SGD is tabular Q-learning.
    """

    def forward(obs):
        layer = hk.Linear(num_actions, with_bias=False, w_init=jnp.zeros, name="table")
        return layer(_flat(obs, obs_ndim))

    return hk.without_apply_rng(hk.transform(forward))


class GaussianParams(NamedTuple):
    """A Gaussian policy head's output, both [..., D]: the mean and log std of u, whose
    tanh is the action (`distrl.agents.distributions`)."""

    mean: jnp.ndarray
    log_std: jnp.ndarray


def action_size(space) -> int:
    """D, the width of a Box policy's action vector; ValueError for a Box of another
    rank (the heads output flat vectors [..., D])."""
    if len(space.shape) != 1:
        raise ValueError(
            f"Box actions of shape {tuple(space.shape)}; the networks take one axis of "
            f"actions, shape (D,)"
        )
    return int(math.prod(space.shape))


def _policy_head(actions, h):
    """Logits [..., A] for Discrete(A) (or an int A); `GaussianParams` [..., D] for a Box,
    its log std a learned vector of the state (`log_std`, starting at 0: std 1)."""
    small = hk.initializers.VarianceScaling(0.01)  # the first policy near uniform / mean 0
    if not isinstance(actions, spaces.Box):
        n = actions if isinstance(actions, int) else actions.n
        return hk.Linear(n, w_init=small, name="policy_head")(h)
    size = action_size(actions)
    mean = hk.Linear(size, w_init=small, name="policy_head")(h)
    log_std = hk.get_parameter("log_std", (size,), init=jnp.zeros)
    return GaussianParams(mean, jnp.broadcast_to(log_std, mean.shape))


def make_actor_critic_network(torso: Torso, actions, shared_torso: bool = False) -> hk.Transformed:
    """Policy head and state value: apply(params, obs [..., *obs_shape]) -> (policy, v
    [...]); the policy is logits [..., A] for `actions` Discrete(A) (or the int A), or
    `GaussianParams` [..., D] for a Box of shape (D,).

    With `shared_torso` one MLP feeds both heads; otherwise the actor and the critic
    have separate torsos of the same sizes (conv layers included). Empty
    `hidden_sizes` and `conv_channels` give linear (tabular, on one-hot obs) heads.
    """

    def forward(obs):
        obs = _input(torso, obs)
        if shared_torso:
            h_pi = h_v = _torso(torso, "torso")(obs)
        else:
            h_pi = _torso(torso, "policy_torso")(obs)
            h_v = _torso(torso, "value_torso")(obs)
        policy = _policy_head(actions, h_pi)  # first: the init keys stay in their order
        value = hk.Linear(1, name="value_head")(h_v)[..., 0]
        return policy, value

    return hk.without_apply_rng(hk.transform(forward))


_VARIANCE = hk.initializers.VarianceScaling()  # hk.GRU's default for w_i and w_h


class GRU(hk.Module):
    """hk.GRU's cell (its parameters w_i, w_h, b, their initialisers and arithmetic) with
    the input projection apart from the recurrence: an unroll projects a whole sequence
    in one batched matmul and runs only the state's two matmuls step by step."""

    def __init__(self, hidden_size: int, name: str | None = None):
        super().__init__(name=name)
        self.hidden_size = hidden_size

    def project(self, x):
        """x [..., I] -> the input's gate pre-activations [..., 3H] (x @ w_i)."""
        shape = [x.shape[-1], 3 * self.hidden_size]
        return jnp.matmul(x, hk.get_parameter("w_i", shape, x.dtype, init=_VARIANCE))

    def weights(self, dtype) -> tuple:
        """(w_h [H, 3H], b [3H]): what `gru_step` takes besides the projected input."""
        h = self.hidden_size
        w_h = hk.get_parameter("w_h", [h, 3 * h], dtype, init=_VARIANCE)
        return w_h, hk.get_parameter("b", [3 * h], dtype, init=jnp.zeros)

    def __call__(self, x, state):
        gates = self.project(x)
        state = gru_step(gates, state, *self.weights(gates.dtype))
        return state, state


def gru_step(gates_x, state, w_h, b):
    """One GRU step from the projected input [..., 3H] and the state [..., H]."""
    h = state.shape[-1]
    zr = gates_x[..., : 2 * h] + jnp.matmul(state, w_h[:, : 2 * h]) + b[: 2 * h]
    z, r = jnp.split(jax.nn.sigmoid(zr), 2, axis=-1)
    a = jnp.tanh(gates_x[..., 2 * h :] + jnp.matmul(r * state, w_h[:, 2 * h :]) + b[2 * h :])
    return (1 - z) * state + z * a


CORES = ("none", "gru")  # an actor-critic's recurrent core after its torso (agent.core)


def core_state(core_size: int, shared_torso: bool, batch_size: int) -> tuple:
    """The recurrent core's zero state: one float32 [B, core_size] per torso (a GRU's
    hidden state), what an episode starts from."""
    zeros = jnp.zeros((batch_size, core_size), jnp.float32)
    return (zeros,) if shared_torso else (zeros, zeros)


class RecurrentNet(NamedTuple):
    """A recurrent network's `init` and `apply` (one step, as hk.Transformed's) and its
    `unroll`: apply(params, state, observation [T, N, ...], last [T, N], next_observation
    [T, N, ...] | None) -> (the state after the last step, outs [T, N, ...], the outs of
    each next observation or None), the state reset to zeros after each step where
    last[t]: `distrl.agents.recurrent.unroll`'s numbers, with every layer that does not
    read the state run once over [T, N] outside the scan."""

    init: Callable
    apply: Callable
    unroll: Callable


def make_recurrent_actor_critic(
    torso: Torso, actions, shared_torso: bool, core_size: int
) -> RecurrentNet:
    """`make_actor_critic_network` with a GRU of `core_size` between each torso and its
    heads: apply(params, obs [N, *obs_shape], state) -> ((policy, v [N]), state), the
    state `core_state`'s tuple (one [N, core_size] per torso). One step of N sequences;
    `unroll` runs it over [T, N]."""
    names = ("torso",) if shared_torso else ("policy_torso", "value_torso")

    def cores():
        return [(_torso(torso, name), GRU(core_size, name=f"{name}_gru")) for name in names]

    def heads(hidden):
        policy = _policy_head(actions, hidden[0])  # first: the init keys stay in their order
        return policy, hk.Linear(1, name="value_head")(hidden[-1])[..., 0]

    def forward(obs, state):
        obs = _input(torso, obs)
        new_state = tuple(gru(body(obs), h)[1] for (body, gru), h in zip(cores(), state))
        return heads(new_state), new_state

    def unroll(state, observation, last, next_observation=None):
        inputs = _input(torso, _and_next(observation, next_observation))
        return _unroll_cores(cores(), heads, state, inputs, last)

    stepped = hk.without_apply_rng(hk.transform(forward))
    return RecurrentNet(
        stepped.init, stepped.apply, hk.without_apply_rng(hk.transform(unroll)).apply
    )


def make_recurrent_q(torso: Torso, num_actions: int, core_size: int) -> RecurrentNet:
    """R2D2's Q network: the torso, a GRU of `core_size`, a linear Q head.
    apply(params, obs [N, *obs_shape], state) -> (q [N, A], state), the state
    `core_state(core_size, True, N)`'s tuple (one torso). One step of N sequences;
    `unroll` runs it over [T, N]."""

    def cores():
        return [(_torso(torso, "torso"), GRU(core_size, name="torso_gru"))]

    def heads(hidden):
        return hk.Linear(num_actions, name="q_head")(hidden[0])

    def forward(obs, state):
        [(body, gru)] = cores()
        _, h = gru(body(obs), state[0])
        return heads((h,)), (h,)

    def unroll(state, observation, last, next_observation=None):
        return _unroll_cores(cores(), heads, state, _and_next(observation, next_observation), last)

    stepped = hk.without_apply_rng(hk.transform(forward))
    return RecurrentNet(
        stepped.init, stepped.apply, hk.without_apply_rng(hk.transform(unroll)).apply
    )


def _and_next(observation, next_observation):
    """observation [T, ...] and, where given, next_observation [T, ...] as one [T or 2T, ...]."""
    if next_observation is None:
        return observation
    return jnp.concatenate([observation, next_observation])


def _unroll_cores(cores, heads, state, inputs, last):
    """A `RecurrentNet.unroll` (see there) of GRU `cores` [(torso, GRU)] and `heads`
    (hidden states, one per core -> outs): each torso and input projection over all of
    `inputs` (the T observations, then the T next ones if `inputs` holds 2T) at once, the
    scan over T steps of the GRUs' state matmuls alone, each next observation's step from
    its step's state (before any reset) and the heads batched after it."""
    steps = last.shape[0]
    gates = [gru.project(body(inputs)) for body, gru in cores]  # [T or 2T, N, 3H] each
    weights = [gru.weights(g.dtype) for (_, gru), g in zip(cores, gates)]

    def step(hs, inputs):
        projected, ended = inputs
        new = tuple(gru_step(g, h, *w) for g, h, w in zip(projected, hs, weights))
        return tuple(jnp.where(ended[..., None], jnp.zeros_like(h), h) for h in new), new

    final, hidden = jax.lax.scan(step, tuple(state), (tuple(g[:steps] for g in gates), last))
    with_next = inputs.shape[0] > steps
    if with_next:
        hidden = tuple(
            jnp.concatenate([h, gru_step(g[steps:], h, *w)])
            for h, g, w in zip(hidden, gates, weights)
        )
    outs = heads(hidden)
    if not with_next:
        return final, outs, None
    return final, jax.tree.map(lambda x: x[:steps], outs), jax.tree.map(lambda x: x[steps:], outs)


# The state-dependent log std of a SAC actor is squashed into this range: wide enough
# for a near-deterministic and a near-uniform policy, narrow enough that exp() stays sane.
LOG_STD_RANGE = (-5.0, 2.0)


def make_gaussian_actor(torso: Torso, actions: spaces.Box) -> hk.Transformed:
    """SAC's actor: apply(params, obs [..., *obs_shape]) -> `GaussianParams` [..., D],
    the log std a function of the state, squashed smoothly into LOG_STD_RANGE."""
    size = action_size(actions)
    low, high = LOG_STD_RANGE

    def forward(obs):
        h = _torso(torso, "policy_torso")(obs)
        mean = hk.Linear(size, name="mean_head")(h)
        raw = hk.Linear(size, name="log_std_head")(h)
        return GaussianParams(mean, low + 0.5 * (high - low) * (jnp.tanh(raw) + 1.0))

    return hk.without_apply_rng(hk.transform(forward))


def make_deterministic_actor(torso: Torso, actions: spaces.Box) -> hk.Transformed:
    """TD3's actor: apply(params, obs [..., *obs_shape]) -> actions [..., D] in [-1, 1]."""
    size = action_size(actions)

    def forward(obs):
        h = _torso(torso, "policy_torso")(obs)
        return jnp.tanh(hk.Linear(size, name="action_head")(h))

    return hk.without_apply_rng(hk.transform(forward))


def make_twin_critic(torso: Torso) -> hk.Transformed:
    """Two independent Q functions of (state, action): apply(params, obs [...,
    *obs_shape], actions [..., D]) -> q [..., 2]. Each flattens the observation (through
    the conv layers, if any), joins the action, then runs its own MLP."""
    features = torso._replace(hidden_sizes=())

    def forward(obs, actions):
        qs = []
        for i in range(2):
            h = _torso(features, f"critic{i}_features")(obs)
            h = jnp.concatenate([h, actions.astype(jnp.float32)], axis=-1)
            mlp = _torso(Torso(torso.hidden_sizes, torso.activation), f"critic{i}")
            qs.append(hk.Linear(1, name=f"critic{i}_head")(mlp(h))[..., 0])
        return jnp.stack(qs, axis=-1)

    return hk.without_apply_rng(hk.transform(forward))


def make_dqn_network(network: str, torso: Torso, num_actions: int) -> hk.Transformed:
    """Picks the Q network by config name: "mlp" (its torso conv when `conv_channels`)
    or "table" (the torso's layers unused)."""
    if network == "mlp":
        return make_q_network(torso, num_actions)
    if network == "table":
        return make_table_network(num_actions, torso.obs_ndim)
    raise ValueError(f"unknown network {network!r}; use 'mlp' or 'table'")
