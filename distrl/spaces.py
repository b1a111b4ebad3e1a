"""What an env's actions are: `Discrete(n)` or `Box(shape, low, high)`, and the one map
from a policy's action to the env's (`to_env`).

Both are frozen dataclasses of ints, floats and tuples: hashable, so an env that holds
its space stays a static `jit` argument. Every policy of a Box acts in
`POLICY_LOW..POLICY_HIGH` ([-1, 1]) per element whatever the bounds (a tanh head or a
clip puts it there), and that action is what the data path records and learns from;
`Box.to_env` maps it affinely onto [low, high] where an env is stepped, and nowhere
else (docs/decisions.md, "Where continuous actions are scaled"). Numpy only: the
actors' JAX rollouts and the host envs' stepper (no JAX) both call it.
"""

import dataclasses
import math

import numpy as np

POLICY_LOW, POLICY_HIGH = -1.0, 1.0  # the range every Box policy acts in


@dataclasses.dataclass(frozen=True)
class Discrete:
    """Actions 0..n-1, one int32 [] per step."""

    n: int
    shape = ()
    dtype = "int32"

    def to_env(self, action):
        """The env takes the agent's action index as is."""
        return action

    def problem(self, action) -> str | None:
        """Why `action` is not one of this space's, or None."""
        a = np.asarray(action)
        if a.shape != () or not 0 <= int(a) < self.n:
            return f"action {action!r} outside Discrete({self.n})"
        return None


@dataclasses.dataclass(frozen=True)
class Box:
    """Actions float32 [*shape], element i within [low[i], high[i]] (row-major, flat).

    Build one with `box(shape, low, high)`; ValueError for infinite or empty bounds.
    """

    shape: tuple
    low: tuple  # one finite float per element
    high: tuple  # one finite float per element, > its low
    dtype = "float32"

    def __post_init__(self):
        size = math.prod(self.shape)
        if not all(isinstance(d, int) and d >= 1 for d in self.shape):
            raise ValueError(f"Box shape {self.shape}; need positive int dims")
        if len(self.low) != size or len(self.high) != size:
            raise ValueError(
                f"Box bounds of {len(self.low)}, {len(self.high)} elements; need {size}"
            )
        for lo, hi in zip(self.low, self.high):
            if not (math.isfinite(lo) and math.isfinite(hi)):
                raise ValueError(
                    f"Box bounds [{lo}, {hi}] are not finite; a policy acting in [-1, 1] "
                    f"needs finite bounds to scale to"
                )
            if not lo < hi:
                raise ValueError(f"Box bounds [{lo}, {hi}]; need low < high")

    def bounds(self) -> tuple:
        """(low, high) as float32 arrays [*shape]."""
        return (
            np.asarray(self.low, np.float32).reshape(self.shape),
            np.asarray(self.high, np.float32).reshape(self.shape),
        )

    def to_env(self, action):
        """The policy's action in [-1, 1] -> the env's in [low, high] (jnp or numpy). The
        clip only absorbs float rounding at the bounds; a NaN stays NaN, for the env's
        checks to name."""
        low, high = self.bounds()
        scaled = low + (action - POLICY_LOW) * ((high - low) / (POLICY_HIGH - POLICY_LOW))
        return scaled.clip(low, high)

    def problem(self, action) -> str | None:
        """Why the env's `action` is not in this space (non-finite, outside the bounds,
        another shape), or None. Bounds are allowed float32 rounding."""
        a = np.asarray(action, np.float64)
        if a.shape != self.shape:
            return f"action of shape {a.shape}; the Box is {self.shape}"
        if not np.all(np.isfinite(a)):
            return f"non-finite action {a.tolist()}"
        low, high = self.bounds()
        slack = 1e-5 * np.maximum(1.0, np.abs(high - low))
        if np.any(a < low - slack) or np.any(a > high + slack):
            return f"action {a.tolist()} outside the Box [{self.low}, {self.high}]"
        return None


def box(shape, low, high) -> Box:
    """A Box of `shape` whose bounds broadcast from `low` and `high` (scalars or arrays)."""
    shape = tuple(int(d) for d in shape)
    low = np.broadcast_to(np.asarray(low, np.float64), shape)
    high = np.broadcast_to(np.asarray(high, np.float64), shape)
    return Box(shape, tuple(float(x) for x in low.flat), tuple(float(x) for x in high.flat))


def is_box(space) -> bool:
    return isinstance(space, Box)
