"""What an evaluation shows people: the per-cell value and arrow grids, and its text.

`value_grid` asks the agent for V (or max Q) and its greedy action in every cell of
a tabular env on a grid (`has_grids`), and `render_values` / `render_arrows` print
them (H and G shown as letters); `report` is both grids,
with the value-error grid of an exact check (`exact_check.exact_answer`) under
them. `describe_*` are the one-line texts of an evaluation's figures and of the
exact check; `shown` leaves the success figures out for an env without a success
signal (`has_success`), where they would all read 0.
"""

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from distrl import envs

ARROWS = "<v>^"  # indexed by action: 0=LEFT 1=DOWN 2=RIGHT 3=UP


def has_success(env) -> bool:
    """Whether the env's episodes succeed or fail (`envs.success_signal`): only then is a
    success rate reported."""
    return envs.success_signal(env) is not None


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
    values, actions = cell_values_jit(agent, params, env)
    shape = (grid.rows, grid.cols)
    return np.asarray(values).reshape(shape), np.asarray(actions).reshape(shape)


# One compiled call instead of many small eager ones; an Agent (a NamedTuple of
# functions and a frozen config) is hashable, so it can be a static argument.
cell_values_jit = jax.jit(cell_values, static_argnums=(0, 2))


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


def describe_exact(answer: dict) -> str:
    """Two lines: the greedy policy's exact figures against the optimum's, and the
    learned V(S) beside the exact value of the policy it estimates, e.g.
    'exact success 0.874, optimal 0.890: 98.2% (best any policy: 0.913); greedy policy
    V(S) +0.500, V*(S) +0.530 (discount 0.99); mean return +0.874, optimal +0.890:
    98.2%' and 'V(S) learned +0.350, exact V^pi(S) +0.360 (sampling policy): error
    -0.010' (the mean return's part, undiscounted, where the answer has it)."""
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
