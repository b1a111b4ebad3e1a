"""The policy distributions of the policy-gradient agents and SAC, chosen by what the
network's policy head outputs: logits [..., A] (a softmax over discrete actions) or
`GaussianParams` (a tanh-squashed Gaussian over actions in [-1, 1]^D).

Every function takes that output as is, so a loss written once (A2C, V-trace, PPO)
acts in either kind of space; the choice is made at trace time from the output's type.

The tanh-squashed Gaussian: u ~ N(mean, exp(log_std)), a = tanh(u) in (-1, 1), the
range every Box policy acts in (`distrl.spaces`). Its log-density carries the change
of variables, log pi(a) = log N(u) - sum_i log(1 - tanh(u_i)^2); the log-probability
of a recorded action inverts the squash (atanh, kept finite at +-1). Its entropy has
no closed form: `entropy` is the Gaussian's before the squash, the usual stand-in for
an entropy bonus (SAC estimates the true one from samples, -log pi(a)).
"""

import math

import jax
import jax.numpy as jnp

from distrl.agents import base
from distrl.agents.rlax_import import rlax
from distrl.networks import GaussianParams

# atanh's input is kept this far inside (-1, 1): a recorded action of exactly +-1 (a
# float32 tanh saturates past |u| ~ 9) gets a finite log-probability
_EDGE = 1.0 - 1e-6
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


def _is_gaussian(out) -> bool:
    return isinstance(out, GaussianParams)


def log_squash_jacobian(u: jnp.ndarray) -> jnp.ndarray:
    """log(1 - tanh(u)^2) [..., D], stably: 2 (log 2 - u - softplus(-2u))."""
    return 2.0 * (math.log(2.0) - u - jax.nn.softplus(-2.0 * u))


def _gaussian_log_prob_of_u(out: GaussianParams, u: jnp.ndarray) -> jnp.ndarray:
    """log pi(tanh(u)) [...]: the Gaussian's log-density of u less the squash's."""
    z = (u - out.mean) * jnp.exp(-out.log_std)
    log_normal = -0.5 * jnp.square(z) - out.log_std - _HALF_LOG_2PI
    return jnp.sum(log_normal - log_squash_jacobian(u), axis=-1)


def sample(key: jax.Array, out):
    """(actions, log_probs [...]): int32 [...] from logits, or float32 [..., D] in (-1, 1)
    from `GaussianParams` (reparameterized: differentiable in mean and log_std)."""
    if not _is_gaussian(out):
        return base.sample_categorical(key, out)
    u = out.mean + jnp.exp(out.log_std) * jax.random.normal(key, out.mean.shape)
    return jnp.tanh(u), _gaussian_log_prob_of_u(out, u)


def log_prob(out, actions: jnp.ndarray) -> jnp.ndarray:
    """log pi(a) [...] of recorded actions (int32 [...] or float32 [..., D])."""
    if not _is_gaussian(out):
        return base.action_log_probs(out, actions)
    u = jnp.arctanh(jnp.clip(actions, -_EDGE, _EDGE))
    return _gaussian_log_prob_of_u(out, u)


def entropy(out) -> jnp.ndarray:
    """[...]: the softmax's entropy, or the Gaussian's before the squash."""
    if not _is_gaussian(out):
        return base.entropy(out)
    return jnp.sum(out.log_std + 0.5 + _HALF_LOG_2PI, axis=-1)


def mode(out) -> jnp.ndarray:
    """The greedy action: argmax of the logits, or tanh(mean) (the squashed mean)."""
    if not _is_gaussian(out):
        return base.argmax_actions(out)
    return jnp.tanh(out.mean)


def policy_gradient_loss(out, actions: jnp.ndarray, advantages: jnp.ndarray) -> jnp.ndarray:
    """-mean(log pi(a) * advantage) [] over [T] steps, the advantages held constant:
    rlax's own for logits, the same sum on the Gaussian's log pi otherwise."""
    if not _is_gaussian(out):
        return rlax.policy_gradient_loss(out, actions, advantages, jnp.ones_like(advantages))
    return -jnp.mean(log_prob(out, actions) * jax.lax.stop_gradient(advantages))


def behaviour(key, out, value, with_value: bool):
    """(actions [B], extras) of a sampled actor-critic policy: extras log_prob [B], and
    value [B] where the learner reads it (`base.records_value`); without it, XLA drops
    the critic from the acting call."""
    actions, log_probs = sample(key, out)
    extras = {"log_prob": log_probs, "value": value} if with_value else {"log_prob": log_probs}
    return actions, extras
