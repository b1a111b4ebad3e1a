"""The greedy policy's exact figures, and the learned value against the exact value.

For a tabular env (`envs.tabular_model`): `exact_answer` scores the greedy policy
exactly against the optimum (`envs.exact`), and checks the learned value against
the exact value of the policy it estimates (`value_check`: Q-learning's greedy
policy, a critic's sampling policy), per cell (`error_grid`). `reporting` prints
what it returns.
"""

import jax
import numpy as np

from distrl import envs
from distrl.acting import reporting
from distrl.envs import exact


def cell_probs(agent, params, env):
    """Action probabilities [num_cells, A] of the policy `agent.value` is for, in every
    cell of a tabular env. Jittable (env is static)."""
    return agent.valued.probs(params, reporting.cell_observations(env))


_cell_probs_jit = jax.jit(cell_probs, static_argnums=(0, 2))


def value_check(env, agent, params, discount: float):
    """(learned values [S], exact values [S]) of the policy the learned value estimates
    (`agent.valued`: Q-learning's greedy policy, a critic's sampling policy), or None
    when the agent learns no value (no critic). Exact: policy evaluation over the env's
    tables within the time limit (`exact.evaluate_stochastic_policy`), so a wrong
    critic differs from it and a right one agrees, whatever the greedy policy does."""
    if agent.valued is None:
        return None
    learned, _ = reporting.cell_values_jit(agent, params, env)
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
    _, actions = (np.asarray(x) for x in reporting.cell_values_jit(agent, params, env))
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
