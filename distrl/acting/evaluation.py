"""Evaluation episodes: greedy (or sampled) play on B envs in one jit, summarized.

Shared by the single-process trainer and the distributed evaluator. `play_episodes`
plays one episode on each of B envs in a single jitted `lax.while_loop` (bounded by
the env's time limit); `summarize` turns them into an `intervals.EvalResult`: the
success rate with its Wilson interval and the mean return with its 95% interval
(exact, zero-width intervals, on a deterministic env with a greedy policy, where one
episode is all there is); `make_evaluator` is both in one jitted call, with the
check of the actions. The stop rule on those figures is `intervals.confirmed`; the
grids and text are `reporting`'s, the exact figures `exact_check`'s.

It needs only the env interface (`distrl.envs.interface`): the success rate counts
episodes that succeed (all fail without a success signal), and one episode is exact
only for an env that declares itself deterministic.
"""

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

from distrl import envs
from distrl.acting import intervals, rollout

WHO = "evaluation"  # who acted, in the error of a non-finite action (`rollout.check_actions`)


def is_deterministic(env: envs.Environment, greedy: bool = True) -> bool:
    """True when every evaluation episode is the same: a deterministic env (the
    non-slippery gridworld) and a greedy policy."""
    return greedy and envs.is_deterministic(env)


class StatefulAct(NamedTuple):
    """A recurrent policy's `act` (`make_act`): each env's state starts at
    `initial_state(B)` with its episode and goes along with it."""

    initial_state: Callable  # (batch_size) -> state [B]
    act: Callable  # (params, key, obs [B, *obs_shape], epsilon, state) -> (actions [B], state)


class _EpisodeCarry(NamedTuple):
    env_state: object  # EnvState [B]
    done: jnp.ndarray  # bool [B]
    episode_return: jnp.ndarray  # float32 [B]
    episode_length: jnp.ndarray  # int32 [B]
    success: jnp.ndarray  # bool [B]
    key: jax.Array
    step: jnp.ndarray  # int32 [], steps played so far (t)
    first_nonfinite_action: jnp.ndarray  # int32 [], as `Episodes`'
    core_state: object = ()  # a `StatefulAct`'s state [B]; () for a plain act


def _episode_step(env: envs.Environment, act: Callable, params, epsilon, carry: _EpisodeCarry):
    """One step of the still-running envs; finished ones are frozen."""
    key, policy_key, env_key = jax.random.split(carry.key, 3)
    obs = jax.vmap(env.observe)(carry.env_state)  # [B, *obs_shape]
    core_state = carry.core_state
    if isinstance(act, StatefulAct):
        actions, core_state = act.act(params, policy_key, obs, epsilon, core_state)
    else:
        actions = act(params, policy_key, obs, epsilon)  # [B]
    env_keys = jax.random.split(env_key, actions.shape[0])
    state, ts = jax.vmap(envs.env_step, (None, 0, 0, 0))(env, carry.env_state, actions, env_keys)
    running = ~carry.done
    found = rollout.first_true(rollout.nonfinite_actions(actions) & running)
    first = carry.first_nonfinite_action
    first = jnp.where((first < 0) & (found >= 0), carry.step * actions.shape[0] + found, first)

    def keep(new, old):  # state leaves may have dims of their own beyond [B]
        return jnp.where(running.reshape(running.shape + (1,) * (new.ndim - 1)), new, old)

    return _EpisodeCarry(
        env_state=jax.tree.map(keep, state, carry.env_state),
        done=carry.done | ts.last,
        episode_return=carry.episode_return + jnp.where(running, ts.reward, 0.0),
        episode_length=carry.episode_length + running.astype(jnp.int32),
        success=carry.success | (running & rollout.ended_in_success(env, ts)),
        key=key,
        step=carry.step + 1,
        first_nonfinite_action=first,
        core_state=jax.tree.map(keep, core_state, carry.core_state),
    )


class Episodes(NamedTuple):
    """B finished episodes, one figure each."""

    success: jnp.ndarray  # bool [B]: succeeded (ended on G in the gridworld)
    episode_return: jnp.ndarray  # float32 [B]
    length: jnp.ndarray  # int32 [B]
    # int32 []: t * B + b of the first step t whose action for a running episode b was
    # not finite, -1 without one (`rollout.check_actions` names it; an env stepped in
    # Python refuses such an action itself, `pyenv.Checked`, so its episodes say -1)
    first_nonfinite_action: jnp.ndarray = -1


def play_episodes(env: envs.Environment, act: Callable, params, key, num_envs: int, epsilon=0.0):
    """One episode per env from its reset, until all are done -> Episodes. Jittable.

    act(params, key, obs [B, *obs_shape], epsilon) -> actions [B], or a `StatefulAct`;
    see `make_act`.
    """
    reset_keys = jax.random.split(key, num_envs)
    state, _ = jax.vmap(env.reset)(reset_keys)
    zeros = jnp.zeros((num_envs,))
    none = jnp.int32(-1)
    core_state = act.initial_state(num_envs) if isinstance(act, StatefulAct) else ()
    carry = _EpisodeCarry(
        state,
        zeros > 0,
        zeros,
        zeros.astype(jnp.int32),
        zeros > 0,
        key,
        jnp.int32(0),
        none,
        core_state,
    )
    carry = jax.lax.while_loop(
        lambda c: ~jnp.all(c.done),  # the time limit guarantees termination
        lambda c: _episode_step(env, act, params, epsilon, c),
        carry,
    )
    return Episodes(
        carry.success, carry.episode_return, carry.episode_length, carry.first_nonfinite_action
    )


def run_episodes(
    env: envs.Environment, act: Callable, params, key, num_envs: int, epsilon=0.0, exact=False
):
    """One episode per env from its reset, until all are done -> EvalResult. Jittable.

    act(params, key, obs [B, *obs_shape], epsilon) -> actions [B]; see `make_act`.
    exact: the episodes are deterministic (see `is_deterministic`), so the success
    rate is the success probability and its interval has zero width.
    """
    return summarize(play_episodes(env, act, params, key, num_envs, epsilon), exact)


def summarize(episodes: Episodes, exact: bool = False) -> intervals.EvalResult:
    """The figures of B finished episodes (`run_episodes`'s, or an env stepped in
    Python's: `host_evaluation`); exact: they are all alike (zero-width intervals)."""
    carry, num_envs = episodes, episodes.success.shape[0]
    rate = jnp.mean(carry.success.astype(jnp.float32))
    low, high = (
        (rate, rate) if exact else intervals.wilson_interval(jnp.sum(carry.success), num_envs)
    )
    mean_return = jnp.mean(carry.episode_return)
    return_low, return_high = (
        (mean_return, mean_return) if exact else intervals.mean_interval(carry.episode_return)
    )
    return intervals.EvalResult(
        success_rate=rate,
        mean_return=mean_return,
        mean_length=jnp.mean(carry.length.astype(jnp.float32)),
        episodes=jnp.float32(num_envs),
        success_low=low,
        success_high=high,
        return_low=return_low,
        return_high=return_high,
    )


def episodes_needed(env: envs.Environment, num_envs: int, greedy: bool = True) -> int:
    """Episodes per evaluation: one where they are all alike, else `num_envs`."""
    return 1 if is_deterministic(env, greedy) else num_envs


def make_act(agent, greedy: bool = True) -> Callable:
    """act(params, key, obs, epsilon) -> actions: the agent's greedy or sampled policy;
    a recurrent agent's is a `StatefulAct` (its core's state carried through episodes)."""
    core = agent.core
    if core is not None and greedy:
        return StatefulAct(core.initial_state, lambda p, k, obs, e, s: core.greedy(p, obs, s))
    if core is not None:
        return StatefulAct(
            core.initial_state, lambda p, k, obs, e, s: _drop_extras(core.policy(p, k, obs, e, s))
        )
    if greedy:
        return lambda params, key, obs, epsilon: agent.greedy(params, obs)
    return lambda params, key, obs, epsilon: agent.policy(params, key, obs, epsilon)[0]


def _drop_extras(acted):
    actions, _, state = acted
    return actions, state


def make_evaluator(
    env: envs.Environment, agent, num_envs: int, greedy: bool = True, env_name: str | None = None
) -> Callable:
    """Jitted `evaluate(params, key, epsilon=0.0) -> EvalResult` on `num_envs` envs.

    On a deterministic map with a greedy policy it plays one episode: it is exact.
    With `env_name` (what the evaluator node and the single-process trainer report by)
    the jitted call is followed by the check of its actions, so `evaluate` is no longer
    traceable: an episode acted with a non-finite action (diverged params) raises
    `EnvError` naming the env, the copy and the step (`rollout.check_actions`).
    """
    act = make_act(agent, greedy)
    exact = is_deterministic(env, greedy)
    n = episodes_needed(env, num_envs, greedy)

    def play(params, key, epsilon=0.0):
        episodes = play_episodes(env, act, params, key, n, epsilon)
        return summarize(episodes, exact), episodes.first_nonfinite_action

    if env_name is None:
        return jax.jit(lambda params, key, epsilon=0.0: play(params, key, epsilon)[0])
    played = jax.jit(play)

    def evaluate(params, key, epsilon=0.0):
        result, first = played(params, key, epsilon)
        rollout.check_actions(first, env_name, WHO, n)
        return result

    return evaluate
