"""Stage 2 of the data flow: Haiku networks as pure (init, apply) pairs.

Every factory returns `hk.without_apply_rng(hk.transform(f))`, so params are plain
pytrees and `apply(params, obs)` is a pure function that the agents vmap and jit.
Inputs are observations [..., *obs_shape] of any dtype (the env's spec): the last
`obs_ndim` dims are flattened and cast to float32 first (a no-op for the gridworld's
float32 one-hot vectors [..., O]); leading dims are free.
"""

from collections.abc import Callable, Sequence

import haiku as hk
import jax
import jax.numpy as jnp

ACTIVATIONS = {"relu": jax.nn.relu, "tanh": jnp.tanh, "elu": jax.nn.elu}


def _activation(name: str) -> Callable:
    if name not in ACTIVATIONS:
        raise ValueError(f"unknown activation {name!r}; pick one of {sorted(ACTIVATIONS)}")
    return ACTIVATIONS[name]


def _flat(obs, obs_ndim: int):
    """[..., *obs_shape] of any dtype -> float32 [..., prod(obs_shape)]."""
    obs = jnp.asarray(obs)
    lead = obs.shape[: obs.ndim - obs_ndim]
    return obs.reshape(lead + (-1,)).astype(jnp.float32)


def _torso(hidden_sizes: Sequence[int], activation: str, name: str) -> Callable:
    """A Linear+activation stack (layers `<name>_<i>`); no sizes: the identity."""
    layers = []
    for i, size in enumerate(hidden_sizes):
        layers += [hk.Linear(size, name=f"{name}_{i}"), _activation(activation)]
    return hk.Sequential(layers)


def make_q_network(
    hidden_sizes: Sequence[int], num_actions: int, activation: str = "relu", obs_ndim: int = 1
) -> hk.Transformed:
    """MLP torso with a Q head: apply(params, obs [..., *obs_shape]) -> q [..., A]."""
    hidden_sizes = tuple(hidden_sizes)

    def forward(obs):
        h = _torso(hidden_sizes, activation, "torso")(_flat(obs, obs_ndim))
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
    hidden_sizes: Sequence[int],
    num_actions: int,
    shared_torso: bool = False,
    activation: str = "tanh",
    obs_ndim: int = 1,
) -> hk.Transformed:
    """Policy logits and state value: apply(params, obs [..., *obs_shape]) -> (logits
    [..., A], v [...]).

    With `shared_torso` one MLP feeds both heads; otherwise the actor and the critic
    have separate torsos of the same sizes. Empty `hidden_sizes` gives linear
    (tabular, on one-hot obs) heads.
    """
    hidden_sizes = tuple(hidden_sizes)

    def forward(obs) -> tuple[jnp.ndarray, jnp.ndarray]:
        obs = _flat(obs, obs_ndim)
        if shared_torso:
            h_pi = h_v = _torso(hidden_sizes, activation, "torso")(obs)
        else:
            h_pi = _torso(hidden_sizes, activation, "policy_torso")(obs)
            h_v = _torso(hidden_sizes, activation, "value_torso")(obs)
        # Small initial logits keep the first policy close to uniform.
        logits = hk.Linear(
            num_actions, w_init=hk.initializers.VarianceScaling(0.01), name="policy_head"
        )(h_pi)
        value = hk.Linear(1, name="value_head")(h_v)[..., 0]
        return logits, value

    return hk.without_apply_rng(hk.transform(forward))


def make_dqn_network(
    network: str,
    hidden_sizes: Sequence[int],
    num_actions: int,
    activation: str = "relu",
    obs_ndim: int = 1,
) -> hk.Transformed:
    """Picks the Q network by config name: "mlp" or "table"."""
    if network == "mlp":
        return make_q_network(hidden_sizes, num_actions, activation, obs_ndim)
    if network == "table":
        return make_table_network(num_actions, obs_ndim)
    raise ValueError(f"unknown network {network!r}; use 'mlp' or 'table'")
