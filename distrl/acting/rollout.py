"""Stage 4 of the data flow: the jitted, vmapped unroll of B envs for T steps.

Shared by the actors, the evaluator and the single-process trainer. One call runs
`lax.scan` over T steps of `jax.vmap`ped `auto_reset_step`, so Python overhead is
paid once per chunk. It returns the chunk as `Transition` [T, B] plus episode
statistics, and a carry to continue from in the next call. It needs only the env
interface (`distrl.envs.interface`); successes are counted where the env has a
success signal, and are 0 otherwise. A recurrent agent acts through its
`agents.recurrent.Core` (`policy_of`): the carry holds the core's state, reset per env
where an episode ended, and the chunk is a `types.CoreChunk` holding the state its
first step was acted from.
"""

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

from distrl import envs
from distrl.agents import recurrent
from distrl.pyenv import EnvError
from distrl.types import CoreChunk, Transition


class RolloutCarry(NamedTuple):
    """What continues between chunks; every field has a leading [B]."""

    env_state: object  # the env's state pytree [B]
    observation: jnp.ndarray  # [B, *observation_shape] (spec's dtype), the policy's next input
    episode_return: jnp.ndarray  # float32 [B], running return of the current episode
    episode_length: jnp.ndarray  # int32 [B]
    core_state: object = ()  # a recurrent policy's state [B] (`policy_of`); () without one


class RolloutStats(NamedTuple):
    """Episode statistics of one chunk (scalars, summed over T and B)."""

    env_steps: jnp.ndarray  # int32 [], T * B
    episodes: jnp.ndarray  # int32 [], episodes completed in the chunk
    return_sum: jnp.ndarray  # float32 [], summed return of those episodes
    length_sum: jnp.ndarray  # int32 [], summed length of those episodes
    successes: jnp.ndarray  # int32 [], those that succeeded (0 without a success signal)
    # int32 [], t * B + b of the chunk's first step whose action has a non-finite element
    # (a policy whose params diverged), -1 without one: the actor names it (`EnvError`)
    first_nonfinite_action: jnp.ndarray


def policy_of(agent):
    """What the rollout acts with: a recurrent agent's `Core`, else its `policy`."""
    return agent.policy if agent.core is None else agent.core


def init_carry(env: envs.Environment, key: jax.Array, batch_size: int, policy=None) -> RolloutCarry:
    """Resets B envs (env i with fold_in(key, i)) -> RolloutCarry [B]; with a recurrent
    `policy` (`policy_of`) its state starts at the core's initial state."""
    keys = jax.vmap(lambda i: jax.random.fold_in(key, i))(jnp.arange(batch_size))
    state, timestep = jax.vmap(env.reset)(keys)
    return RolloutCarry(
        env_state=state,
        observation=timestep.observation,
        episode_return=jnp.zeros((batch_size,), jnp.float32),
        episode_length=jnp.zeros((batch_size,), jnp.int32),
        core_state=_initial_state(policy, batch_size),
    )


def _initial_state(policy, batch_size: int):
    return policy.initial_state(batch_size) if isinstance(policy, recurrent.Core) else ()


def ended_in_success(env: envs.Environment, timesteps: envs.TimeStep) -> jnp.ndarray:
    """bool [B]: the steps that end an episode in success (all False without a signal)."""
    success = envs.success_signal(env)
    if success is None:
        return jnp.zeros_like(timesteps.last)
    return timesteps.last & jax.vmap(success)(timesteps)


def _env_step(env: envs.Environment, policy: Callable, params, epsilon, carry: RolloutCarry, key):
    """One step of B envs: returns (carry, (Transition [B], per-env end stats))."""
    policy_key, env_key = jax.random.split(key)
    core_state = carry.core_state
    if isinstance(policy, recurrent.Core):
        actions, extras, core_state = policy.policy(
            params, policy_key, carry.observation, epsilon, core_state
        )
    else:
        actions, extras = policy(params, policy_key, carry.observation, epsilon)  # [B]
    env_keys = jax.random.split(env_key, actions.shape[0])
    state, ts = jax.vmap(envs.auto_reset_step, (None, 0, 0, 0))(
        env, carry.env_state, actions, env_keys
    )
    transition = Transition(
        observation=carry.observation,
        action=actions,
        reward=ts.reward,
        discount=ts.discount,
        last=ts.last,
        next_observation=ts.observation,
        extras=extras,
    )
    ep_return = carry.episode_return + ts.reward
    ep_length = carry.episode_length + 1
    success = ended_in_success(env, ts)
    ends = (
        ts.last,
        jnp.where(ts.last, ep_return, 0.0),
        jnp.where(ts.last, ep_length, 0),
        success,
        nonfinite_actions(actions),
    )
    new_carry = RolloutCarry(
        env_state=state,
        observation=jax.vmap(env.observe)(state),
        episode_return=jnp.where(ts.last, 0.0, ep_return),
        episode_length=jnp.where(ts.last, 0, ep_length),
        # a new episode starts from the core's initial state
        core_state=recurrent.reset_where(
            ts.last, core_state, _initial_state(policy, actions.shape[0])
        ),
    )
    return new_carry, (transition, ends)


def nonfinite_actions(actions) -> jnp.ndarray:
    """bool [B]: the actions with a non-finite element (all False for integer actions)."""
    if jnp.issubdtype(actions.dtype, jnp.integer):
        return jnp.zeros(actions.shape[:1], bool)
    return ~jnp.all(jnp.isfinite(actions.reshape(actions.shape[0], -1)), axis=1)


def first_true(mask: jnp.ndarray) -> jnp.ndarray:
    """int32 []: the flat (row-major) index of `mask`'s first True, -1 without one."""
    flat = mask.reshape(-1)
    return jnp.where(jnp.any(flat), jnp.argmax(flat), -1).astype(jnp.int32)


def check_actions(first, env_name: str, who: str, num_envs: int, steps_before: int = 0):
    """Raises an `EnvError` naming the env, who acted (an actor, the evaluator, the
    single-process trainer), the copy and its step when a JAX env was acted with a
    non-finite action (diverged params), as each copy of an env stepped in Python does
    (`pyenv.Checked`). `first`: t * num_envs + b of the first such step, found inside
    the jit (`RolloutStats.first_nonfinite_action`, `evaluation.Episodes`), -1 without
    one; `steps_before`: each copy's steps before step t = 0."""
    first = int(first)
    if first < 0:
        return
    t, copy = divmod(first, num_envs)
    raise EnvError(
        f"env {env_name} ({who}, copy {copy}) at step {steps_before + t + 1}: "
        f"the policy's action is not finite (its params diverged)"
    )


def unroll(env: envs.Environment, policy: Callable, num_steps: int, params, carry, key, epsilon):
    """Un-jitted body of `make_rollout` (for fusing into larger jitted steps)."""

    def body(c, k):
        return _env_step(env, policy, params, epsilon, c, k)

    start_state = carry.core_state
    carry, (traj, ends) = jax.lax.scan(body, carry, jax.random.split(key, num_steps))
    last, returns, lengths, success, nonfinite = ends  # [T, B] each
    stats = RolloutStats(
        env_steps=jnp.int32(num_steps * carry.observation.shape[0]),
        episodes=jnp.sum(last, dtype=jnp.int32),
        return_sum=jnp.sum(returns),
        length_sum=jnp.sum(lengths, dtype=jnp.int32),
        successes=jnp.sum(success, dtype=jnp.int32),
        first_nonfinite_action=first_true(nonfinite),
    )
    if isinstance(policy, recurrent.Core):  # the learner unrolls the core from here
        traj = CoreChunk(traj, jax.tree.map(lambda x: x[None], start_state))
    return carry, traj, stats


def make_rollout(env: envs.Environment, policy: Callable, num_steps: int) -> Callable:
    """Returns jitted `rollout(params, carry, key, epsilon) -> (carry, Transition [T, B], stats)`.

    `policy(params, key, obs [B, *obs_shape], epsilon) -> (actions [B], extras)` is an
    agent's acting policy, or a recurrent agent's `Core` (`policy_of`; the chunk is
    then a `CoreChunk`); B is taken from the carry (see `init_carry`).
    """

    def rollout(params, carry: RolloutCarry, key: jax.Array, epsilon):
        return unroll(env, policy, num_steps, params, carry, key, epsilon)

    return jax.jit(rollout)
