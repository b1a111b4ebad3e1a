"""The benchmark table's rows: figure, ceiling, ratio, goal, and whether the goal holds.

`benchmarks.rows` declares which rows there are and computes them from `run.py`'s
results; this module formats them (`fmt`, `to_markdown`).
"""

import dataclasses

from distrl.metrics import human


@dataclasses.dataclass
class Row:
    """One line of the table. `ratio` is figure / ceiling. `goal` is text such as
    '>= 0.8x' (on the ratio: it ends in 'x'), '<= 10 s' (on the figure) or 'within 25%'
    (the ratio within 25% of 1). `platform` and `device`: what measured it (the bench
    process's JAX backend and device kind; `common.device_fields`)."""

    section: str
    name: str
    figure: float | None
    unit: str
    ceiling: float | None = None
    ceiling_name: str = ""
    goal: str = ""
    note: str = ""
    platform: str = ""
    device: str = ""

    @property
    def ratio(self) -> float | None:
        if self.figure is None or not self.ceiling:
            return None
        return self.figure / self.ceiling

    @property
    def status(self) -> str:
        """'PASS' or 'MISS' against the goal; '' without a goal, '—' without a figure."""
        if not self.goal:
            return ""
        op, number = self.goal.split()[:2]
        value = self.ratio if number.endswith(("x", "%")) else self.figure
        if value is None:
            return "—"
        if op == "within":
            return "PASS" if abs(value - 1) <= float(number.rstrip("%")) / 100 else "MISS"
        target = float(number.rstrip("x"))
        return "PASS" if (value <= target if op == "<=" else value >= target) else "MISS"

    def as_dict(self) -> dict:
        return dict(dataclasses.asdict(self), ratio=self.ratio, status=self.status)


def fmt(value, unit: str = "") -> str:
    """1234567 -> '1.23M', 0.512 -> '0.512', 0.25 'share' -> '25%', None -> '—'."""
    if value is None:
        return "—"
    if isinstance(value, str):
        return value
    if unit == "x":
        return f"{value:.2f}x" if value < 100 else f"{value:,.0f}x"
    if unit == "s":
        return f"{value:.1f} s"
    if unit == "share":
        return f"{100 * value:.0f}%"
    return human(value) if abs(value) >= 1e3 else f"{value:.3g}"


def to_markdown(rows) -> str:
    """The table as GitHub markdown: one line per row, the goal and PASS/MISS beside it."""
    lines = [
        "| section | row | figure | ceiling | ratio | goal | holds | details |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        figure = fmt(row.figure, row.unit) + ("" if row.unit == "s" else f" {row.unit}")
        ceiling = f"{fmt(row.ceiling, row.unit)} ({row.ceiling_name})" if row.ceiling else ""
        ratio = fmt(row.ratio, "x") if row.ratio is not None else ""
        lines.append(
            f"| {row.section} | {row.name} | {figure} | {ceiling} | {ratio} "
            f"| {row.goal} | {row.status} | {row.note} |"
        )
    return "\n".join(lines)
