"""Evaluation: greedy (or sampled) episodes and the per-cell value / arrow grids.

Shared by the single-process trainer and the distributed evaluator. `run_episodes`
plays one episode on each of B envs in a single jitted `lax.while_loop` (bounded by
the env's time limit) and reports the success rate with its Wilson interval (exact,
a zero-width interval, on a deterministic map with a greedy policy, where one
episode is all there is); `confirmed` is the stop rule every trainer uses: the
interval's lower bound must reach the target. `value_grid` asks the agent for V
(or max Q) and its greedy
action in every cell, and `render_values` / `render_arrows` print them the way the
series did (H and G shown as letters). `exact_answer` scores the greedy policy
exactly and checks the learned value against the exact value of the policy it
estimates (`value_check`), per cell (`error_grid`).

Every evaluation reports the mean return with its 95% interval (normal
approximation), the figure any env has; `confirmed` stops on it (a return target)
and on the success interval (a success target), whichever are set.

It needs only the env interface (`distrl.envs.interface`): the success rate counts
episodes that succeed (all fail without a success signal; `has_success` and `shown`
leave it out of what is reported there), one episode is exact
only for an env that declares itself deterministic, and the grids and exact
figures (`has_grids`, `exact_answer`) exist only for a tabular env on a grid.
"""

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from distrl import envs
from distrl.acting import rollout
from distrl.envs import exact

ARROWS = "<v>^"  # indexed by action: 0=LEFT 1=DOWN 2=RIGHT 3=UP


WILSON_Z = 1.96  # the 95% two-sided normal quantile
WHO = "evaluation"  # who acted, in the error of a non-finite action (`rollout.check_actions`)


class EvalResult(NamedTuple):
    """Statistics over B evaluation episodes (scalars)."""

    success_rate: jnp.ndarray  # fraction of episodes that succeeded (on G in the gridworld)
    mean_return: jnp.ndarray
    mean_length: jnp.ndarray
    episodes: jnp.ndarray  # B, the episodes behind these figures
    success_low: jnp.ndarray  # 95% Wilson interval of the success probability
    success_high: jnp.ndarray  # (both = success_rate when the episodes are deterministic)
    return_low: jnp.ndarray = 0.0  # 95% normal interval of the mean return
    return_high: jnp.ndarray = 0.0  # (both = mean_return when deterministic)


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


def confirmed(result, target: float, min_episodes: int = 0, target_return: float = 0.0):
    """The stop rule: the lower bound of each interval with a target reaches it (jittable).

    target: the success target (0: none); target_return: the mean return's (0: none);
    with both set, both must be reached; with neither, never. Only an exact evaluation
    (zero width) or one of at least `min_episodes` episodes counts: a trainer evaluates
    hundreds of times, and 1 in 40 of the 95% intervals of small routine evaluations
    lies wholly above the truth by chance.
    """
    if not (target or target_return):
        return jnp.bool_(False)
    # no episodes (a trainer's zero result before its first evaluation) confirm nothing,
    # even a negative return target that its zeros would reach
    exact = (result.success_low == result.success_high) & (result.episodes > 0)
    success = result.success_low >= target  # always true for target 0
    mean_return = (target_return == 0) | (result.return_low >= target_return)
    return success & mean_return & (exact | (result.episodes >= min_episodes))


def touches(result, target: float, min_episodes: int, target_return: float = 0.0):
    """True when `result` reaches the targets but is too small to count: confirm it."""
    if not (target or target_return):
        return jnp.bool_(False)
    near = (result.success_rate >= target) & (
        (target_return == 0) | (result.mean_return >= target_return)
    )
    # logical_not, not ~: `confirmed` of a host result (Python floats) is a Python bool
    return near & jnp.logical_not(confirmed(result, target, min_episodes, target_return))


def has_success(env) -> bool:
    """Whether the env's episodes succeed or fail (`envs.success_signal`): only then is a
    success rate reported."""
    return envs.success_signal(env) is not None


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
    return summarize(play_episodes(env, act, params, key, num_envs, epsilon), exact)


def summarize(episodes: Episodes, exact: bool = False) -> EvalResult:
    """The figures of B finished episodes (`run_episodes`'s, or an env stepped in
    Python's: `host_evaluation`); exact: they are all alike (zero-width intervals)."""
    carry, num_envs = episodes, episodes.success.shape[0]
    rate = jnp.mean(carry.success.astype(jnp.float32))
    low, high = (rate, rate) if exact else wilson_interval(jnp.sum(carry.success), num_envs)
    mean_return = jnp.mean(carry.episode_return)
    return_low, return_high = (
        (mean_return, mean_return) if exact else mean_interval(carry.episode_return)
    )
    return EvalResult(
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


def has_grids(env) -> bool:
    """Whether the env has cells to value and a grid to draw them on (the gridworld)."""
    return envs.grid_of(env) is not None


def cell_observations(env) -> jnp.ndarray:
    """Every cell's observation [num_cells, *obs_shape] of a tabular env."""
    return jnp.asarray(envs.tabular_model(env).cell_observations())


def cell_values(agent, params, env):
    """(values [num_cells], greedy actions [num_cells]) for every cell's observation of a
    tabular env (`envs.tabular_model`). Jittable (env is static)."""
    obs = cell_observations(env)
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


def report(env, agent=None, params=None, grids=None, answer=None) -> str:
    """Both grids, ready to print; from `grids` = (values, actions) [num_cells] if given.
    With `answer` (`exact_answer`'s dict) the value-error grid follows (`describe_errors`).
    An env with grids only (`has_grids`)."""
    grid = envs.grid_of(env)
    if grids is None:
        values, actions = value_grid(env, agent, params)
    else:
        values, actions = (np.asarray(g).reshape(grid.rows, grid.cols) for g in grids)
    untrained = answer is not None and answer.get("learned_policy", "") is None
    heading = "values (no critic: an untrained head, no learned value)" if untrained else "values"
    text = (
        f"{heading}:\n{render_values(values, grid.desc)}\n"
        f"greedy policy:\n{render_arrows(actions, grid.desc)}"
    )
    errors = describe_errors(answer, grid.desc) if answer is not None else ""
    return f"{text}\n{errors}" if errors else text


# How reports name the policy whose value an agent learns (`agents.base.ValuedPolicy`).
VALUED_POLICY = {"greedy": "greedy policy", "sampling": "sampling policy"}


def cell_probs(agent, params, env):
    """Action probabilities [num_cells, A] of the policy `agent.value` is for, in every
    cell of a tabular env. Jittable (env is static)."""
    return agent.valued.probs(params, cell_observations(env))


_cell_probs_jit = jax.jit(cell_probs, static_argnums=(0, 2))


def value_check(env, agent, params, discount: float):
    """(learned values [S], exact values [S]) of the policy the learned value estimates
    (`agent.valued`: Q-learning's greedy policy, a critic's sampling policy), or None
    when the agent learns no value (no critic). Exact: policy evaluation over the env's
    tables within the time limit (`exact.evaluate_stochastic_policy`), so a wrong
    critic differs from it and a right one agrees, whatever the greedy policy does."""
    if agent.valued is None:
        return None
    learned, _ = _cell_values_jit(agent, params, env)
    probs = np.asarray(_cell_probs_jit(agent, params, env))
    mine = exact.evaluate_stochastic_policy(envs.tabular_model(env), probs, discount)
    return np.asarray(learned, np.float64), mine.value


def error_grid(env, learned, exact_values) -> list:
    """learned - exact per cell, [rows][cols] lists on a grid (None on H and G, where
    the episode has ended and no value is learned), else one list over the cells."""
    grid = envs.grid_of(env)
    if grid is None:
        return [float(e) for e in np.asarray(learned) - np.asarray(exact_values)]
    error = (np.asarray(learned) - np.asarray(exact_values)).reshape(grid.rows, grid.cols)
    terminal = np.array([[ch in "HG" for ch in row] for row in grid.desc])
    return [[None if t else float(e) for e, t in zip(*row)] for row in zip(error, terminal)]


def exact_answer(env, agent, params, discount: float, best=None) -> dict:
    """The greedy policy's exact figures at S against the optimum's (`envs.exact`), and
    the learned value checked against the exact value of the policy it estimates, for a
    tabular env (`envs.tabular_model`). S is the start cell, or with a start
    distribution (Taxi) every figure at S is the expectation over it (`exact.at_start`).

    Returns a JSON-ready dict: `exact.Answer`'s fields (`value`: the greedy policy's
    V(S); `mean_return`, `optimal_return`: undiscounted expected returns), its ratios
    (`ratio` of success, `return_ratio`), the discount, and the value check:
    `learned_value` (the agent's V(S) or max_a Q(S)), `learned_policy` ("greedy" or
    "sampling", the policy that
    value is for), `learned_policy_value` (that policy's exact V(S)), `learned_error`
    (their difference) and `value_errors` (the difference per cell, `error_grid`);
    all None when the agent learns no value.
    """
    model = envs.tabular_model(env)
    _, actions = (np.asarray(x) for x in _cell_values_jit(agent, params, env))
    result = exact.answer(model, actions, discount, best)
    check = value_check(env, agent, params, discount)
    learned = dict.fromkeys(
        ("learned_value", "learned_policy", "learned_policy_value", "learned_error", "value_errors")
    )
    if check is not None:
        mine, truth = (exact.at_start(model, x) for x in check)
        learned = dict(
            learned_value=mine,
            learned_policy=agent.valued.name,
            learned_policy_value=truth,
            learned_error=mine - truth,
            value_errors=error_grid(env, *check),
        )
    ratios = dict(ratio=result.ratio, return_ratio=result.return_ratio)
    return dict(result._asdict(), **ratios, discount=float(discount), **learned)


def describe_exact(answer: dict) -> str:
    """Two lines: the greedy policy's exact figures against the optimum's, and the
    learned V(S) beside the exact value of the policy it estimates, e.g.
    'exact success 0.874, optimal 0.890: 98.2% (best any policy: 0.913); greedy policy
    V(S) +0.500, V*(S) +0.530 (discount 0.99); mean return +0.874, optimal +0.890:
    98.2%' and 'V(S) learned +0.350, exact V^pi(S) +0.360 (sampling policy): error
    -0.010' (the mean return's part, undiscounted, in results of this version on)."""
    first = (
        f"exact success {answer['success']:.3f}, optimal {answer['optimal_success']:.3f}: "
        f"{100 * answer['ratio']:.1f}% (best any policy: {answer['max_success']:.3f}); "
        f"greedy policy V(S) {answer['value']:+.3f}, V*(S) {answer['optimal_value']:+.3f} "
        f"(discount {answer['discount']:g})"
    )
    if answer.get("mean_return") is not None:
        first += (
            f"; mean return {answer['mean_return']:+.3f}, optimal "
            f"{answer['optimal_return']:+.3f}: {100 * answer['return_ratio']:.1f}%"
        )
    return f"{first}\n{describe_learned(answer)}"


def describe_learned(answer: dict) -> str:
    """The learned V(S) against the exact value of the policy it estimates (one line)."""
    if "learned_policy" not in answer:  # a result.json from before the check
        return f"V(S) learned {answer['learned_value']:+.3f} (not checked: an older result)"
    if answer["learned_policy"] is None:
        return "V(S): none learned (no critic), so no value to check"
    return (
        f"V(S) learned {answer['learned_value']:+.3f}, exact V^pi(S) "
        f"{answer['learned_policy_value']:+.3f} ({VALUED_POLICY[answer['learned_policy']]}): "
        f"error {answer['learned_error']:+.3f}"
    )


def describe_errors(answer: dict, desc) -> str:
    """The value-error grid as text under a heading naming the policy; "" without one
    (no critic, which `report`'s values heading and `describe_learned` say)."""
    if answer.get("value_errors") is None:
        return ""
    errors = np.asarray(answer["value_errors"], np.float64)  # None (H, G) -> nan, not shown
    errors = np.round(errors, 2) + 0.0  # float noise as +0.00, not -0.00 (-0.0 + 0.0 = 0.0)
    name = VALUED_POLICY[answer["learned_policy"]]
    return f"value error, learned - exact V^pi ({name}):\n{render_values(errors, desc)}"


def shown(result: dict, env) -> dict:
    """An evaluation's figures as reported: without the success ones for an env that
    has no success signal (there they would all read 0)."""
    if has_success(env):
        return dict(result)
    return {k: v for k, v in result.items() if not k.startswith("success")}


def describe_return(result) -> str:
    """'mean return +0.812 [+0.790, +0.834] (95%, 1000 episodes)', or 'mean return +1.000
    (exact: deterministic, 1 episode)'."""
    r = result._asdict() if hasattr(result, "_asdict") else result
    mean, episodes = float(r["mean_return"]), int(r["episodes"])
    if "return_low" not in r:  # a result.json from before the interval was recorded
        return f"mean return {mean:+.3f}"
    low, high = float(r["return_low"]), float(r["return_high"])
    if episodes == 1:  # an exact evaluation (zero width by construction)
        return f"mean return {mean:+.3f} (exact: deterministic, 1 episode)"
    return f"mean return {mean:+.3f} [{low:+.3f}, {high:+.3f}] (95%, {episodes} episodes)"


def describe_success(result) -> str:
    """'success rate 0.874 [0.853, 0.893] (95% Wilson, 1000 episodes)', or 'success rate
    1.000 (exact: deterministic, 1 episode)'."""
    r = result._asdict() if hasattr(result, "_asdict") else result
    rate, low, high = (float(r[k]) for k in ("success_rate", "success_low", "success_high"))
    episodes = int(r["episodes"])
    if low == high:
        return f"success rate {rate:.3f} (exact: deterministic, {episodes} episode)"
    return f"success rate {rate:.3f} [{low:.3f}, {high:.3f}] (95% Wilson, {episodes} episodes)"
