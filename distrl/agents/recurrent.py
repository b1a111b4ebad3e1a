"""Recurrent policies (`agent.core="gru"`): the state a policy carries from step to step.

A recurrent agent acts through its `Core`: each call takes the core's state [B] and
returns the next one, and whoever steps envs (`distrl.acting`) resets it to the
initial state where an episode ended (`reset_where`). The learner unrolls the same
network over a chunk [T, N] from the state stored with it (`types.CoreChunk`),
resetting it at the same steps (`unroll`), so it sees what the actor saw.
"""

import functools
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

from distrl import networks
from distrl.agents import assembly, base
from distrl.agents import distributions as dist


class Core(NamedTuple):
    """A recurrent agent's acting functions, with the state they carry.

    initial_state: (batch_size) -> the state of B fresh episodes (a pytree, leaves [B, ...]).
    policy: (params, key, obs [B, *obs_shape], epsilon, state) -> (actions [B], extras, state).
    greedy: (params, obs [B, *obs_shape], state) -> (actions [B], state).
    """

    initial_state: Callable
    policy: Callable
    greedy: Callable


def is_recurrent(config) -> bool:
    """Whether an agent config names a recurrent core (`core` other than "none")."""
    return getattr(config, "core", "none") != "none"


def reset_where(ended, state, initial):
    """`state` with each env's entry b replaced by `initial`'s where ended[b] (bool [B])."""

    def pick(new, old):
        return jnp.where(ended.reshape(ended.shape + (1,) * (new.ndim - 1)), new, old)

    return jax.tree.map(pick, initial, state)


def unroll(step: Callable, start_state, observation, last, next_observation=None):
    """`step(obs [N, ...], state) -> (out, state)` over a chunk [T, N] from `start_state`
    [N, ...], the state reset to zeros after each step where last[t] (bool [T, N]), as the
    actor reset it. Returns outs [T, N, ...], and with `next_observation` also the outs
    of each step's next observation from that step's state (before any reset): the
    value to bootstrap a truncated episode or the chunk's end from."""
    _, outs, next_outs = _scan(step, start_state, observation, last, next_observation)
    return outs if next_observation is None else (outs, next_outs)


def unroll_of(net) -> Callable:
    """(params, state, observation, last, next_observation=None) -> (final state, outs,
    next outs or None) of `unroll`'s steps: the network's own `unroll` where it has one
    (`networks.RecurrentNet`: its state-free layers batched outside the scan), else a
    scan of `net.apply`."""
    if hasattr(net, "unroll"):
        return net.unroll
    return lambda params, state, observation, last, next_observation=None: _scan(
        functools.partial(net.apply, params), state, observation, last, next_observation
    )


def warm(step: Callable, start_state, observation, last):
    """The state after `unroll`'s steps over [T] (a burn-in: only the state is kept)."""
    return _scan(step, start_state, observation, last, None)[0]


def _scan(step, start_state, observation, last, next_observation):
    """(final state, outs, next outs or None) of `unroll`."""
    initial = jax.tree.map(jnp.zeros_like, start_state)

    def body(state, inputs):
        obs, ended, next_obs = inputs
        out, state = step(obs, state)
        next_out = None if next_obs is None else step(next_obs, state)[0]
        return reset_where(ended, state, initial), (out, next_out)

    state, (outs, next_outs) = jax.lax.scan(
        body, start_state, (observation, last, next_observation)
    )
    return state, outs, next_outs


def make_network(config, env_spec):
    """(network, initial_state) of an actor-critic config with a core."""
    obs_shape = base.observation_shape(env_spec)
    net = networks.make_recurrent_actor_critic(
        networks.torso_of(config, obs_shape),
        base.action_space(env_spec),
        config.shared_torso,
        config.core_size,
    )

    def initial_state(batch_size: int):
        return networks.core_state(config.core_size, config.shared_torso, batch_size)

    return net, initial_state


def make_init(
    net, initial_state: Callable, optimizer, obs_shape: tuple, with_target: bool = False
) -> Callable:
    """Jitted `init(key) -> TrainingState` of a recurrent network (target_params =
    params if with_target, else None)."""

    @jax.jit
    def init(key):
        key, init_key = jax.random.split(key)
        params = net.init(init_key, jnp.zeros((1, *obs_shape), jnp.float32), initial_state(1))
        target = params if with_target else None
        return base.TrainingState(
            params, target, optimizer.init(params), key, jnp.zeros((), jnp.int32)
        )

    return init


def make_core(net, initial_state: Callable, with_value: bool) -> Core:
    """The acting functions of a recurrent actor-critic: a softmax or squashed Gaussian
    sampled (extras as the feed-forward policy's, `distributions.behaviour`), or its mode."""

    def policy(params, key, observations, epsilon, state):
        del epsilon
        (policy_out, value), state = net.apply(params, observations, state)
        return (*dist.behaviour(key, policy_out, value, with_value), state)

    def greedy(params, observations, state):
        (policy_out, _), state = net.apply(params, observations, state)
        return dist.mode(policy_out), state

    return Core(initial_state, policy, greedy)


def stateless(net, core: Core, value_of: Callable = lambda out: out[1]):
    """(policy, greedy, value) of `Agent` for a recurrent network: each call from the
    initial state, as a fresh episode's first step (what a caller that keeps no state,
    such as a value grid, can ask). value_of: the network's output -> values [B] (an
    actor-critic's value head by default)."""

    def policy(params, key, observations, epsilon):
        state = core.initial_state(observations.shape[0])
        return core.policy(params, key, observations, epsilon, state)[:2]

    def greedy(params, observations):
        return core.greedy(params, observations, core.initial_state(observations.shape[0]))[0]

    def value(params, observations):
        state = core.initial_state(observations.shape[0])
        return value_of(net.apply(params, observations, state)[0])

    return policy, greedy, value


def sequence_outputs(net, params, chunk, start_state, with_next: bool = False):
    """The network's (policy, value) over a chunk `Transition` [T, N] unrolled from
    `start_state` (`unroll_of`); with_next: also the value of each step's next
    observation [T, N]."""
    next_observation = chunk.next_observation if with_next else None
    _, outs, next_outs = unroll_of(net)(
        params, start_state, chunk.observation, chunk.last, next_observation
    )
    return (outs, next_outs[1]) if with_next else outs


def make_agent(config, env_spec, update_impl) -> base.Agent:
    """A recurrent actor-critic agent (`Agent.core`) around `update_impl(net, optimizer,
    config, state, batch: types.CoreChunk) -> (state, metrics)`."""
    net, initial_state = make_network(config, env_spec)
    optimizer = base.optimizer_of(config)
    core = make_core(net, initial_state, base.records_value(config))
    return assembly.assemble(
        config,
        net,
        make_init(net, initial_state, optimizer, base.observation_shape(env_spec)),
        functools.partial(update_impl, net, optimizer, config),
        stateless(net, core),
        core=core,
    )
