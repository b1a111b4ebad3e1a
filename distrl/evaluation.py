"""Evaluation: greedy (or sampled) episodes and the per-cell value / arrow grids.

Shared by the single-process trainer and the distributed evaluator. `run_episodes`
plays one episode on each of B envs in a single jitted `lax.while_loop` (bounded by
the env's time limit) and reports the success rate with its Wilson interval (exact,
a zero-width interval, on a deterministic map with a greedy policy, where one
episode is all there is); `confirmed` is the stop rule every trainer uses: the
interval's lower bound must reach the target. `value_grid` asks the agent for V
(or max Q) and its greedy
action in every cell, and `render_values` / `render_arrows` print them the way the
series did (H and G shown as letters).

It needs only the env interface (`distrl.envs.interface`): the success rate counts
episodes that succeed (all fail without a success signal), one episode is exact
only for an env that declares itself deterministic, and the grids and exact
figures (`has_grids`, `exact_answer`) exist only for a tabular env on a grid.
"""

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from distrl import envs, rollout
from distrl.envs import exact

ARROWS = "<v>^"  # indexed by action: 0=LEFT 1=DOWN 2=RIGHT 3=UP


WILSON_Z = 1.96  # the 95% two-sided normal quantile


class EvalResult(NamedTuple):
    """Statistics over B evaluation episodes (scalars)."""

    success_rate: jnp.ndarray  # fraction of episodes that succeeded (on G in the gridworld)
    mean_return: jnp.ndarray
    mean_length: jnp.ndarray
    episodes: jnp.ndarray  # B, the episodes behind these figures
    success_low: jnp.ndarray  # 95% Wilson interval of the success probability
    success_high: jnp.ndarray  # (both = success_rate when the episodes are deterministic)


def wilson_interval(successes, n, z: float = WILSON_Z):
    """(low, high): the Wilson score interval of a binomial proportion. Jittable.

    Unlike the normal approximation it stays inside [0, 1] and is not empty at 0 or n
    successes: 64 of 64 gives (0.943, 1.0), 1 of 1 gives (0.207, 1.0).
    """
    n = jnp.maximum(jnp.asarray(n, jnp.float32), 1.0)
    p = jnp.asarray(successes, jnp.float32) / n
    z2 = z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z * jnp.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return jnp.clip(centre - half, 0.0, 1.0), jnp.clip(centre + half, 0.0, 1.0)


def is_deterministic(env: envs.Environment, greedy: bool = True) -> bool:
    """True when every evaluation episode is the same: a deterministic env (the
    non-slippery gridworld) and a greedy policy."""
    return greedy and envs.is_deterministic(env)


def confirmed(result, target: float, min_episodes: int = 0):
    """The stop rule: the success interval's lower bound reaches `target` (jittable).

    Only an exact evaluation (zero width) or one of at least `min_episodes` episodes
    counts: a trainer evaluates hundreds of times, and 1 in 40 of the 95% intervals
    of small routine evaluations lies wholly above the truth by chance.
    """
    exact = result.success_low == result.success_high
    return (result.success_low >= target) & (exact | (result.episodes >= min_episodes))


def touches(result, target: float, min_episodes: int):
    """True when `result` reaches `target` but is too small to count: confirm it."""
    return (result.success_rate >= target) & ~confirmed(result, target, min_episodes)


class _EpisodeCarry(NamedTuple):
    env_state: object  # EnvState [B]
    done: jnp.ndarray  # bool [B]
    episode_return: jnp.ndarray  # float32 [B]
    episode_length: jnp.ndarray  # int32 [B]
    success: jnp.ndarray  # bool [B]
    key: jax.Array


def _episode_step(env: envs.Environment, act: Callable, params, epsilon, carry: _EpisodeCarry):
    """One step of the still-running envs; finished ones are frozen."""
    key, policy_key, env_key = jax.random.split(carry.key, 3)
    obs = jax.vmap(env.observe)(carry.env_state)  # [B, *obs_shape]
    actions = act(params, policy_key, obs, epsilon)  # [B]
    env_keys = jax.random.split(env_key, actions.shape[0])
    state, ts = jax.vmap(env.step)(carry.env_state, actions, env_keys)
    running = ~carry.done
    keep = lambda new, old: jnp.where(running, new, old)
    return _EpisodeCarry(
        env_state=jax.tree.map(keep, state, carry.env_state),
        done=carry.done | ts.last,
        episode_return=carry.episode_return + jnp.where(running, ts.reward, 0.0),
        episode_length=carry.episode_length + running.astype(jnp.int32),
        success=carry.success | (running & rollout.ended_in_success(env, ts)),
        key=key,
    )


class Episodes(NamedTuple):
    """B finished episodes, one figure each."""

    success: jnp.ndarray  # bool [B]: succeeded (ended on G in the gridworld)
    episode_return: jnp.ndarray  # float32 [B]
    length: jnp.ndarray  # int32 [B]


def play_episodes(env: envs.Environment, act: Callable, params, key, num_envs: int, epsilon=0.0):
    """One episode per env from its reset, until all are done -> Episodes. Jittable.

    act(params, key, obs [B, *obs_shape], epsilon) -> actions [B]; see `make_act`.
    """
    reset_keys = jax.random.split(key, num_envs)
    state, _ = jax.vmap(env.reset)(reset_keys)
    zeros = jnp.zeros((num_envs,))
    carry = _EpisodeCarry(state, zeros > 0, zeros, zeros.astype(jnp.int32), zeros > 0, key)
    carry = jax.lax.while_loop(
        lambda c: ~jnp.all(c.done),  # the time limit guarantees termination
        lambda c: _episode_step(env, act, params, epsilon, c),
        carry,
    )
    return Episodes(carry.success, carry.episode_return, carry.episode_length)


def mean_interval(values, z: float = WILSON_Z):
    """(low, high): the normal-approximation 95% interval of the mean of `values` [B].
    Jittable; zero width for equal values (deterministic episodes)."""
    n = values.shape[0]
    mean = jnp.mean(values)
    half = z * jnp.std(values, ddof=min(1, n - 1)) / jnp.sqrt(n)
    return mean - half, mean + half


def run_episodes(
    env: envs.Environment, act: Callable, params, key, num_envs: int, epsilon=0.0, exact=False
):
    """One episode per env from its reset, until all are done -> EvalResult. Jittable.

    act(params, key, obs [B, *obs_shape], epsilon) -> actions [B]; see `make_act`.
    exact: the episodes are deterministic (see `is_deterministic`), so the success
    rate is the success probability and its interval has zero width.
    """
    carry = play_episodes(env, act, params, key, num_envs, epsilon)
    rate = jnp.mean(carry.success.astype(jnp.float32))
    low, high = (rate, rate) if exact else wilson_interval(jnp.sum(carry.success), num_envs)
    return EvalResult(
        success_rate=rate,
        mean_return=jnp.mean(carry.episode_return),
        mean_length=jnp.mean(carry.length.astype(jnp.float32)),
        episodes=jnp.float32(num_envs),
        success_low=low,
        success_high=high,
    )


def episodes_needed(env: envs.Environment, num_envs: int, greedy: bool = True) -> int:
    """Episodes per evaluation: one where they are all alike, else `num_envs`."""
    return 1 if is_deterministic(env, greedy) else num_envs


def make_act(agent, greedy: bool = True) -> Callable:
    """act(params, key, obs, epsilon) -> actions: the agent's greedy or sampled policy."""
    if greedy:
        return lambda params, key, obs, epsilon: agent.greedy(params, obs)
    return lambda params, key, obs, epsilon: agent.policy(params, key, obs, epsilon)[0]


def make_evaluator(env: envs.Environment, agent, num_envs: int, greedy: bool = True) -> Callable:
    """Jitted `evaluate(params, key, epsilon=0.0) -> EvalResult` on `num_envs` envs.

    On a deterministic map with a greedy policy it plays one episode: it is exact.
    """
    act = make_act(agent, greedy)
    exact = is_deterministic(env, greedy)
    n = episodes_needed(env, num_envs, greedy)

    def evaluate(params, key, epsilon=0.0):
        return run_episodes(env, act, params, key, n, epsilon, exact=exact)

    return jax.jit(evaluate)


def has_grids(env) -> bool:
    """Whether the env has cells to value and a grid to draw them on (the gridworld)."""
    return envs.grid_of(env) is not None


def cell_values(agent, params, env):
    """(values [num_cells], greedy actions [num_cells]) for every cell's observation of a
    tabular env (`envs.tabular_model`). Jittable (env is static)."""
    obs = jnp.asarray(envs.tabular_model(env).cell_observations())
    return agent.value(params, obs), agent.greedy(params, obs)


def value_grid(env, agent, params) -> tuple[np.ndarray, np.ndarray]:
    """(values [rows, cols] float, greedy actions [rows, cols] int) for every cell of an
    env with grids (`has_grids`)."""
    grid = envs.grid_of(env)
    values, actions = _cell_values_jit(agent, params, env)
    shape = (grid.rows, grid.cols)
    return np.asarray(values).reshape(shape), np.asarray(actions).reshape(shape)


# One compiled call instead of many small eager ones; an Agent (a NamedTuple of
# functions and a frozen config) is hashable, so it can be a static argument.
_cell_values_jit = jax.jit(cell_values, static_argnums=(0, 2))


def _cell_text(desc, render: Callable) -> list:
    """Rows of cell strings: H and G as letters, other cells through render(r, c)."""
    return [
        [ch if ch in "HG" else render(r, c) for c, ch in enumerate(row)]
        for r, row in enumerate(desc)
    ]


def render_values(values: np.ndarray, desc) -> str:
    """Value grid as text, one row per line, e.g. '+0.59  +0.66  +0.73  +0.66'."""
    cells = _cell_text(desc, lambda r, c: f"{values[r, c]:+.2f}")
    return "\n".join("  ".join(f"{s:>5}" for s in row) for row in cells)


def render_arrows(actions: np.ndarray, desc) -> str:
    """Greedy-action grid as text, e.g. '>   >   v   v' (columns 4 wide)."""
    cells = _cell_text(desc, lambda r, c: ARROWS[int(actions[r, c])])
    return "\n".join("".join(f"{s:<4}" for s in row).rstrip() for row in cells)


def report(env, agent=None, params=None, grids=None) -> str:
    """Both grids, ready to print; from `grids` = (values, actions) [num_cells] if given.
    An env with grids only (`has_grids`)."""
    grid = envs.grid_of(env)
    if grids is None:
        values, actions = value_grid(env, agent, params)
    else:
        values, actions = (np.asarray(g).reshape(grid.rows, grid.cols) for g in grids)
    return (
        f"values:\n{render_values(values, grid.desc)}\n"
        f"greedy policy:\n{render_arrows(actions, grid.desc)}"
    )


def exact_answer(env, agent, params, discount: float, best=None) -> dict:
    """The greedy policy's exact figures at S against the optimum's (`envs.exact`), for
    a tabular env (`envs.tabular_model`).

    Returns a JSON-ready dict: `exact.Answer`'s fields, its ratio, the agent's own
    value estimate V(S) (`learned_value`) and the discount they are for.
    """
    model = envs.tabular_model(env)
    values, actions = (np.asarray(x) for x in _cell_values_jit(agent, params, env))
    result = exact.answer(model, actions, discount, best)
    return dict(
        result._asdict(),
        ratio=result.ratio,
        learned_value=float(values[model.start_cell]),
        discount=float(discount),
    )


def describe_exact(answer: dict) -> str:
    """'exact success 0.874, optimal 0.890: 98.2%; V(S) learned +0.51, exact +0.50, V* +0.53'."""
    return (
        f"exact success {answer['success']:.3f}, optimal {answer['optimal_success']:.3f}: "
        f"{100 * answer['ratio']:.1f}% (best any policy: {answer['max_success']:.3f}); "
        f"V(S) learned {answer['learned_value']:+.3f}, exact {answer['value']:+.3f}, "
        f"V*(S) {answer['optimal_value']:+.3f} (discount {answer['discount']:g})"
    )


def describe_success(result) -> str:
    """'success rate 0.874 [0.853, 0.893] (95% Wilson, 1000 episodes)', or 'success rate
    1.000 (exact: deterministic, 1 episode)'."""
    r = result._asdict() if hasattr(result, "_asdict") else result
    rate, low, high = (float(r[k]) for k in ("success_rate", "success_low", "success_high"))
    episodes = int(r["episodes"])
    if low == high:
        return f"success rate {rate:.3f} (exact: deterministic, {episodes} episode)"
    return f"success rate {rate:.3f} [{low:.3f}, {high:.3f}] (95% Wilson, {episodes} episodes)"
