"""Stage 2 of the data flow: Haiku networks as pure (init, apply) pairs.

Every factory returns `hk.without_apply_rng(hk.transform(f))`, so params are plain
pytrees and `apply(params, obs)` is a pure function that the agents vmap and jit.
Inputs are observations [..., *obs_shape] of any dtype (the env's spec): the last
`obs_ndim` dims are flattened and cast to float32 first (a no-op for the gridworld's
float32 one-hot vectors [..., O]); leading dims are free. With `conv_channels` the
torso starts with Conv2D layers on image observations [..., H, W, C] (MinAtar's
10x10xC), flattened into the MLP; `torso_kind` picks conv or MLP from the config.
"""

from collections.abc import Callable
from typing import NamedTuple

import haiku as hk
import jax
import jax.numpy as jnp

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


def torso_of(agent_config, obs_shape: tuple) -> Torso:
    """The torso an agent config (`hidden_sizes`, `activation`, `torso`, `conv_*`) gives
    on observations of `obs_shape`."""
    return Torso(
        tuple(agent_config.hidden_sizes),
        agent_config.activation,
        len(obs_shape),
        conv_channels(agent_config, obs_shape),
        agent_config.conv_kernel,
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


def _torso(torso: Torso, name: str) -> Callable:
    """obs [..., *obs_shape] -> features [..., width].

    Conv2D+activation layers (`<name>_conv_<i>`, stride 1, SAME padding: the image
    keeps its H x W) when `conv_channels` is not empty, then flattened into a
    Linear+activation stack (layers `<name>_<i>`); no layers at all: the flat obs.
    """
    hidden_sizes, activation, obs_ndim, conv_channels, conv_kernel = torso
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
            hk.Conv2D(channels, conv_kernel, name=f"{name}_conv_{i}"),
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


def make_actor_critic_network(
    torso: Torso, num_actions: int, shared_torso: bool = False
) -> hk.Transformed:
    """Policy logits and state value: apply(params, obs [..., *obs_shape]) -> (logits
    [..., A], v [...]).

    With `shared_torso` one MLP feeds both heads; otherwise the actor and the critic
    have separate torsos of the same sizes (conv layers included). Empty
    `hidden_sizes` and `conv_channels` give linear (tabular, on one-hot obs) heads.
    """

    def forward(obs) -> tuple[jnp.ndarray, jnp.ndarray]:
        if shared_torso:
            h_pi = h_v = _torso(torso, "torso")(obs)
        else:
            h_pi = _torso(torso, "policy_torso")(obs)
            h_v = _torso(torso, "value_torso")(obs)
        # Small initial logits keep the first policy close to uniform.
        logits = hk.Linear(
            num_actions, w_init=hk.initializers.VarianceScaling(0.01), name="policy_head"
        )(h_pi)
        value = hk.Linear(1, name="value_head")(h_v)[..., 0]
        return logits, value

    return hk.without_apply_rng(hk.transform(forward))


def make_dqn_network(network: str, torso: Torso, num_actions: int) -> hk.Transformed:
    """Picks the Q network by config name: "mlp" (its torso conv when `conv_channels`)
    or "table" (the torso's layers unused)."""
    if network == "mlp":
        return make_q_network(torso, num_actions)
    if network == "table":
        return make_table_network(num_actions, torso.obs_ndim)
    raise ValueError(f"unknown network {network!r}; use 'mlp' or 'table'")
