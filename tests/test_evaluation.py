"""Evaluation: scripted episodes with known outcomes, value and arrow grid rendering."""

import jax
import jax.numpy as jnp
import numpy as np

from distrl import agents, evaluation
from distrl.agents.base import Agent
from distrl.envs import make_env

ENV = make_env("4x4")
ROUTE = np.zeros(16, np.int32)  # 0 -> 1 -> 2 -> 6 -> 10 -> 14 -> 15
ROUTE[[0, 1, 14]] = 2
ROUTE[[2, 6, 10]] = 1


def table_agent(action_table):
    """An Agent whose greedy action and value are looked up per cell."""
    table = jnp.asarray(action_table)

    def greedy(params, obs):
        return table[jnp.argmax(obs, -1)]

    def value(params, obs):
        return jnp.argmax(obs, -1) / 10.0

    def policy(params, key, obs, epsilon):
        return greedy(params, obs), {}

    return Agent(None, None, policy, greedy, value, None, "transitions", None, None)


def evaluate(action_table, num_envs=3):
    evaluate_fn = evaluation.make_evaluator(ENV, table_agent(action_table), num_envs)
    return jax.device_get(evaluate_fn(None, jax.random.PRNGKey(0)))


def test_episodes_known_outcomes():
    result = evaluate(ROUTE)
    assert (result.success_rate, result.mean_return, result.mean_length) == (1.0, 1.0, 6.0)
    down = np.full(16, 1, np.int32)  # S -> 4 -> 8 -> 12 (H)
    assert tuple(evaluate(down)) == (0.0, -1.0, 3.0)
    left = np.zeros(16, np.int32)  # bumps the wall until the time limit
    assert tuple(evaluate(left, num_envs=2)) == (0.0, 0.0, 100.0)


def test_render_tiny_grid():
    desc = ("SF", "HG")
    values = np.array([[0.5, -0.25], [9.0, 9.0]])
    assert evaluation.render_values(values, desc) == "+0.50  -0.25\n    H      G"
    actions = np.array([[2, 1], [0, 0]])
    assert evaluation.render_arrows(actions, desc) == ">   v\nH   G"


def test_render_arrows_as_the_series_printed():
    series = ">   >   v   v\n^   H   v   H\n^   >   v   H\nH   >   >   G"
    codes = {"<": 0, "v": 1, ">": 2, "^": 3, "H": 0, "G": 0}
    actions = np.array([[codes[c] for c in line.split()] for line in series.splitlines()])
    assert evaluation.render_arrows(actions, ENV.desc) == series


def test_value_grid_and_report():
    values, actions = evaluation.value_grid(ENV, table_agent(ROUTE), None)
    np.testing.assert_allclose(values, np.arange(16).reshape(4, 4) / 10.0, rtol=1e-6)
    np.testing.assert_array_equal(actions, ROUTE.reshape(4, 4))
    text = evaluation.report(ENV, table_agent(ROUTE), None)
    assert text.splitlines()[1] == "+0.00  +0.10  +0.20  +0.30"
    assert text.splitlines()[-1] == "H   <   >   G"  # cell 13 is off the route: LEFT


def test_value_grid_of_a_tabular_dqn():
    agent = agents.make_agent(agents.make_config("tabular"), ENV)
    table = jnp.arange(64, dtype=jnp.float32).reshape(16, 4)[:, ::-1]  # max in column 0
    values, actions = evaluation.value_grid(ENV, agent, {"table": {"w": table}})
    np.testing.assert_allclose(values.reshape(-1), np.arange(16) * 4 + 3)
    np.testing.assert_array_equal(actions, 0)
