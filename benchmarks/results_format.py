"""How the results tables write their cells: returns, shares of the optimum, across-seed
intervals (`benchmarks/aggregate.py`), env steps, markdown tables."""

import re
import statistics

from benchmarks import aggregate, evidence


def fmt(x, exact: bool) -> str:
    """A return in as many digits as it needs, or a share of the optimum in percent."""
    if x is None:
        return "—"
    if exact:
        return f"{x:.1%}"
    size = abs(x)
    return f"{x:,.0f}" if size >= 100 else f"{x:.1f}" if size >= 10 else f"{x:.2f}"


def values_of(group) -> list:
    return [v for v in group.values if v is not None]


def interval(values, exact: bool, statistic: str = "mean") -> str:
    """'mean [low, high]' over seeds (the 95% bootstrap interval); one seed: the value."""
    if not values:
        return "—"
    s = aggregate.summarize(values)
    centre, low, high = (s.mean, s.mean_low, s.mean_high) if statistic == "mean" else s[4:7]
    if s.n == 1:
        return fmt(centre, exact)
    return f"{fmt(centre, exact)} [{fmt(low, exact)}, {fmt(high, exact)}]"


def seeds_cell(group) -> str:
    n = len(group.seeds)
    return f"{n}, {group.mode}" + (" (under 5)" if n < evidence.FEWER else "")


def to_target_cell(group) -> str:
    """Median [min-max] env steps to the target over the seeds that reached it."""
    reached = sorted(x for x in group.to_target if x is not None)
    if not reached:
        return "—"
    median = statistics.median(reached)
    spread = f" [{evidence.steps(reached[0])}-{evidence.steps(reached[-1])}]" * (len(reached) > 1)
    return f"{evidence.steps(median)}{spread} ({len(reached)} of {len(group.seeds)})"


def table(header, rows) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    cells = lambda row: " | ".join(str(c).replace("|", "\\|") for c in row)  # noqa: E731
    return "\n".join(lines + [f"| {cells(row)} |" for row in rows])


def short_of(values, published: str, exact: bool) -> bool:
    """The across-seed mean's 95% interval lies wholly below the published figure (its
    leading number; the optimum, 100%, for a tabular env); False where there is none."""
    if exact:
        target = 1.0
    else:
        found = re.match(r"-?[\d,]+(\.\d+)?", published)
        if not found:  # "—", or "about 10 ...": nothing to fall short of
            return False
        target = float(found.group(0).replace(",", ""))
    return len(values) > 1 and aggregate.summarize(values).mean_high < target
