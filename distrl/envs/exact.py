"""Exact answers for a tabular env (`interface.Tabular`: the gridworld, gymnasium's toy
text) by dynamic programming over its own transition tables, numpy on the host.

A policy's success probability and discounted value, and the best achievable ones,
are computed instead of estimated from episodes, within the time limit H; for
discount gamma and k steps left (k = H at the start):
  value_k(s)   = E[sum_t gamma^t r_t] over the next k steps (0 on terminal cells)
  success_k(s) = P(reaching a goal within k steps)

`evaluate_policy` scores one action per cell (a greedy policy), and
`evaluate_stochastic_policy` a distribution per cell (the softmax a critic's V is
for). `optimum` gives pi*, the optimal stationary policy of the discounted problem
("optimal" in reports means pi*'s; the discount changes it), and two bounds beside
it: the time-aware optimum and the best success of any policy. Every figure is per
cell; a run reports it at the start (`at_start`: the start cell, or the expectation
over a `start_distribution` such as Taxi's). `returns` is a policy's undiscounted
expected return (what a mean episode return estimates), `return_target` a fraction
of pi*'s as a return to stop at, and `make_policy_stats` the same programme jitted,
for a training loop to screen its greedy policy.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from distrl.envs.interface import Dynamics, Tabular

_TIE = 1e-9  # values this close count as tied (float64 sums of a few hundred terms)


class PolicyValue(NamedTuple):
    """A stationary policy's exact figures for every cell with H steps left."""

    success: np.ndarray  # float64 [S]
    value: np.ndarray  # float64 [S]
    returns: np.ndarray  # float64 [S]: the undiscounted expected return (an episode's)


def dynamics(env: Tabular) -> Dynamics:
    """The env's transition tables as outcome arrays (see `interface.Dynamics`)."""
    return env.dynamics()


def start_distribution(env: Tabular) -> np.ndarray:
    """float64 [S]: where episodes start; the model's `start_distribution` when it has
    one, else all of it on `start_cell`."""
    given = getattr(env, "start_distribution", None)
    if given is not None:
        return np.asarray(given, np.float64)
    weights = np.zeros(env.num_cells)
    weights[env.start_cell] = 1.0
    return weights


def at_start(env: Tabular, per_cell) -> float:
    """A per-cell figure [S] at the start: its expectation over `start_distribution`."""
    return float(start_distribution(env) @ np.asarray(per_cell, np.float64))


def return_target(optimal_return: float, fraction: float) -> float:
    """The mean return that is `fraction` of the optimal one: J* - (1 - fraction) |J*|.

    Returns can be negative, so this is not fraction x J*: the allowed shortfall is
    (1 - fraction) of the optimum's magnitude, J/J* >= fraction where J* > 0 (Taxi's
    +7.9: 98% is +7.74, about 0.16 steps of -1 more per episode than the optimum),
    and as far below a negative J* (-13 -> -13.26). J* = 0 allows no shortfall.
    """
    return float(optimal_return - (1.0 - fraction) * abs(optimal_return))


def _backup(d: Dynamics, gamma: float, value: np.ndarray, success: np.ndarray):
    """One step of lookahead: (q_value [S, A], q_success [S, A]) from k-1 to k steps left."""
    alive = ~d.terminal[d.next_cell]  # [S, A, K]: the episode goes on after landing
    q_value = np.sum(d.prob * (d.reward + gamma * alive * value[d.next_cell]), -1)
    q_success = np.sum(d.prob * (d.goal[d.next_cell] + alive * success[d.next_cell]), -1)
    return q_value, q_success


def evaluate_policy(env: Tabular, actions, discount: float) -> PolicyValue:
    """Exact success probability and discounted value of `actions` [S] (one per cell)."""
    actions = np.asarray(actions, np.int64).reshape(env.num_cells)
    num_actions = dynamics(env).prob.shape[1]
    # A deterministic policy is the one-hot distribution: one programme for both.
    return evaluate_stochastic_policy(env, np.eye(num_actions)[actions], discount)


def evaluate_stochastic_policy(env: Tabular, probs, discount: float) -> PolicyValue:
    """Exact success probability and discounted value of a stochastic policy.

    probs [S, A]: the probability of each action in each cell (a softmax policy's, as
    sampled by an actor), rows summing to 1 within 1e-4 (float32 softmax) and
    renormalized. Policy evaluation over the env's tables: each backup takes the
    expectation over the policy's actions of the one-step lookahead, H times.
    """
    d = dynamics(env)
    probs = np.asarray(probs, np.float64).reshape(env.num_cells, d.prob.shape[1])
    sums = probs.sum(-1)
    if np.any(probs < 0) or not np.allclose(sums, 1.0, atol=1e-4):
        raise ValueError(f"probs must be [S, A] distributions; row sums {sums}")
    probs = probs / sums[:, None]
    value, success, returns = (np.zeros(env.num_cells) for _ in range(3))
    for _ in range(env.time_limit):
        q_value, q_success = _backup(d, discount, value, success)
        q_return = _backup(d, 1.0, returns, success)[0]  # undiscounted
        value, success = np.sum(probs * q_value, -1), np.sum(probs * q_success, -1)
        returns = np.sum(probs * q_return, -1)
        for array in (value, success, returns):
            array[d.terminal] = 0.0
    return PolicyValue(success, value, returns)


class Optimum(NamedTuple):
    """The optimum for every cell with H steps left (see module docstring)."""

    policy: np.ndarray  # int64 [S]: pi*, the optimal stationary policy for the discount
    success: np.ndarray  # float64 [S]: pi*'s success probability within the time limit
    value: np.ndarray  # float64 [S]: V*, pi*'s discounted value within the time limit
    horizon_success: np.ndarray  # float64 [S]: the time-aware optimum's success
    horizon_value: np.ndarray  # float64 [S]: the time-aware optimum's value (>= V*)
    max_success: np.ndarray  # float64 [S]: the best success probability of any policy
    returns: np.ndarray  # float64 [S]: pi*'s undiscounted expected return


def _best(q_value: np.ndarray, q_success: np.ndarray) -> np.ndarray:
    """Actions [S] that maximise q_value, ties (up to float noise) broken by q_success."""
    tied = q_value >= q_value.max(-1, keepdims=True) - _TIE
    return np.argmax(np.where(tied, q_success, -np.inf), -1)


def stationary_optimum(
    env: Tabular, discount: float, tol: float = 1e-12, max_iterations: int = 100_000
) -> np.ndarray:
    """pi* [S]: value iteration to convergence over the infinite-horizon discounted problem.

    This is the policy an agent that sees only the cell converges to: the learners
    bootstrap through the time limit, so they learn these Q values.
    """
    d = dynamics(env)
    cells = np.arange(env.num_cells)
    value, success = np.zeros(env.num_cells), np.zeros(env.num_cells)
    for _ in range(max_iterations):
        q_value, q_success = _backup(d, discount, value, success)
        action = _best(q_value, q_success)
        new_value, success = q_value[cells, action], q_success[cells, action]
        new_value[d.terminal], success[d.terminal] = 0.0, 0.0
        converged = np.max(np.abs(new_value - value)) < tol
        value = new_value
        if converged:
            break
    return action


def _horizon_optimum(env: Tabular, discount: float):
    """Finite-horizon value iteration: (value [S], its success [S], max success [S]).
    The time-aware optimum's policy depends on the steps left, so no cell-only policy can
    follow it; its value bounds every policy's."""
    d = dynamics(env)
    cells = np.arange(env.num_cells)
    value, success, best = (np.zeros(env.num_cells) for _ in range(3))
    for _ in range(env.time_limit):
        q_value, q_success = _backup(d, discount, value, success)
        action = _best(q_value, q_success)
        value, success = q_value[cells, action], q_success[cells, action]
        # Max success: the same backup with reward 1 for G only and no discount.
        best = _backup(d, 1.0, np.zeros(env.num_cells), best)[1].max(-1)
        for array in (value, success, best):
            array[d.terminal] = 0.0
    return value, success, best


def optimum(env: Tabular, discount: float) -> Optimum:
    """pi* and its exact figures, the time-aware optimum and the max success (all [S])."""
    policy = stationary_optimum(env, discount)
    mine = evaluate_policy(env, policy, discount)
    horizon_value, horizon_success, best = _horizon_optimum(env, discount)
    return Optimum(
        policy, mine.success, mine.value, horizon_success, horizon_value, best, mine.returns
    )


class Answer(NamedTuple):
    """What a run reports at the start (`at_start`): the policy's exact figures against
    pi*'s (see `optimum`)."""

    success: float  # the policy's exact success probability within the time limit
    value: float  # the policy's exact discounted value V^pi(S) within the time limit
    optimal_success: float  # pi*'s success probability
    optimal_value: float  # V*(S), pi*'s value
    horizon_success: float  # the time-aware optimum's success
    max_success: float  # the best success probability of any policy
    mean_return: float  # the policy's undiscounted expected return
    optimal_return: float  # pi*'s undiscounted expected return

    @property
    def ratio(self) -> float:
        """success / optimal_success (1.0 when the optimum itself is 0)."""
        return self.success / self.optimal_success if self.optimal_success > 0 else 1.0

    @property
    def return_ratio(self) -> float:
        """The fraction of the optimal return reached, in `return_target`'s sense:
        1 - (J* - J) / |J*| (J / J* when J* > 0); with J* = 0, 1.0 if J >= 0 else 0.0."""
        gap, scale = self.optimal_return - self.mean_return, abs(self.optimal_return)
        if scale == 0:
            return 1.0 if gap <= 0 else 0.0
        return 1.0 - gap / scale

    def describe(self) -> str:
        """E.g. 'exact success 0.874, optimal 0.890: 98.2%; V(S) 0.512, V*(S) 0.530'."""
        return (
            f"exact success {self.success:.3f}, optimal {self.optimal_success:.3f}: "
            f"{100 * self.ratio:.1f}%; exact V(S) {self.value:+.3f}, "
            f"V*(S) {self.optimal_value:+.3f}"
        )


def answer(env: Tabular, actions, discount: float, best: Optimum | None = None) -> Answer:
    """The exact figures at S for `actions` [S]; pass `best` to reuse a computed optimum."""
    best = optimum(env, discount) if best is None else best
    mine = evaluate_policy(env, actions, discount)
    return Answer(
        *(at_start(env, x) for x in (mine.success, mine.value, best.success, best.value)),
        *(at_start(env, x) for x in (best.horizon_success, best.max_success)),
        at_start(env, mine.returns),
        at_start(env, best.returns),
    )


def make_policy_stats(env: Tabular):
    """Jittable `stats(actions [S] int) -> (success, mean return, mean length)` at the
    start (`at_start`).

    The same dynamic programme as `evaluate_policy` (undiscounted: the mean return
    and length of an episode from S), in float32 JAX so that a jitted training loop
    can score its greedy policy exactly for the cost of H small gathers.
    """
    import jax  # noqa: PLC0415 - the rest of this module is numpy only
    import jax.numpy as jnp  # noqa: PLC0415

    d = dynamics(env)
    cells = jnp.arange(env.num_cells)
    goal = jnp.asarray(d.goal[d.next_cell], jnp.float32)  # [S, A, K]
    alive = jnp.asarray(~d.terminal[d.next_cell], jnp.float32)
    prob, reward = jnp.asarray(d.prob, jnp.float32), jnp.asarray(d.reward, jnp.float32)
    next_cell, terminal = jnp.asarray(d.next_cell), jnp.asarray(d.terminal)
    start = jnp.asarray(start_distribution(env), jnp.float32)

    def stats(actions):
        pick = lambda x: x[cells, actions]  # noqa: E731 - [S, A, K] -> [S, K]
        p, g, a, r, n = pick(prob), pick(goal), pick(alive), pick(reward), pick(next_cell)

        def backup(_, carry):  # (success, return, length) [S] with one more step left
            new = [jnp.sum(p * (x + a * y[n]), -1) for x, y in zip((g, r, 1.0), carry)]
            return tuple(jnp.where(terminal, 0.0, x) for x in new)

        zero = jnp.zeros(env.num_cells, jnp.float32)
        out = jax.lax.fori_loop(0, env.time_limit, backup, (zero, zero, zero))
        return tuple(start @ x for x in out)

    return stats
