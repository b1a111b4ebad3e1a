"""Range checks for the agents' config dataclasses (pure Python, no JAX).

Each config dataclass lists one rule per field (`RULES`, the shared fields' rules
from `agents.settings`) and calls `check` from `__post_init__`, so a config that
cannot train (a NaN learning rate, an unknown optimizer) is refused when it is
built, wherever that happens. A rule is
(predicate, what is valid); the error names the field, its value and the rule.
`check_action_space` refuses an env whose actions the agent cannot take.
"""

import dataclasses
import math

from distrl import spaces


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _integer(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


POSITIVE = (lambda v: _number(v) and v > 0, "a finite number > 0")
NONNEGATIVE = (lambda v: _number(v) and v >= 0, "a finite number >= 0")
FINITE = (_number, "a finite number")
FRACTION = (lambda v: _number(v) and 0 <= v <= 1, "a number in [0, 1]")
OPEN_FRACTION = (lambda v: _number(v) and 0 < v <= 1, "a number in (0, 1]")
FLAG = (lambda v: isinstance(v, bool), "True or False")
# Widths of hidden layers; sizes that a machine cannot hold are refused by the
# experiment's memory estimate (distrl.config.check_resources), not here.
SIZES = (
    lambda v: isinstance(v, tuple) and all(_integer(s) and s >= 1 for s in v),
    "a tuple of layer widths >= 1, e.g. (64, 64), or () for none",
)
CHANNELS = (
    lambda v: isinstance(v, tuple) and len(v) >= 1 and all(_integer(c) and c >= 1 for c in v),
    "a tuple of one or more channel counts >= 1, e.g. (16,) or (16, 32)",
)


def at_least(low: int):
    return (lambda v: _integer(v) and v >= low, f"an integer >= {low}")


def one_of(*names: str):
    return (lambda v: v in names, f"one of {', '.join(map(repr, names))}")


def check(config, rules: dict) -> None:
    """ValueError 'field=value; need <rule>' for the first field that breaks its rule."""
    for field in dataclasses.fields(config):
        ok, valid = rules[field.name]
        value = getattr(config, field.name)
        if not ok(value):
            raise ValueError(f"{field.name}={value!r}; need {valid}")


def check_action_space(config, space: spaces.Box | spaces.Discrete) -> None:
    """ValueError naming the space when the agent of `config` cannot act in its kind:
    the config class lists the kinds it takes (`ACTION_SPACES`)."""
    kinds = config.ACTION_SPACES
    if not isinstance(space, kinds):
        takes = " or ".join(k.__name__ for k in kinds)
        raise ValueError(f"acts in {takes} action spaces; this env's actions are {space}")
