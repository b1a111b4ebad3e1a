"""The figures of B evaluation episodes with their 95% intervals, and the stop rule.

`EvalResult` holds them: the success rate with its Wilson interval (`wilson_interval`:
inside [0, 1], not empty at 0 or B successes) and the mean return with its normal
interval (`mean_interval`), the figure any env has; both zero-width when the
episodes are deterministic. `confirmed` is the stop rule every trainer uses: the
lower bound of each interval with a target (success, return) must reach it, from an
exact evaluation or one of enough episodes; `touches` says when a routine
evaluation reaches the targets but is too small to count. All jittable.
"""

from typing import NamedTuple

import jax.numpy as jnp

WILSON_Z = 1.96  # the 95% two-sided normal quantile


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


def mean_interval(values, z: float = WILSON_Z):
    """(low, high): the normal-approximation 95% interval of the mean of `values` [B].
    Jittable; zero width for equal values (deterministic episodes)."""
    n = values.shape[0]
    mean = jnp.mean(values)
    half = z * jnp.std(values, ddof=min(1, n - 1)) / jnp.sqrt(n)
    return mean - half, mean + half


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
