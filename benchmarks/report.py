"""The benchmark table: a row is (figure, ceiling, ratio, target, PASS/MISS).

`Row` and the targets of issue 6 live here, with `fmt` and `to_markdown`;
`benchmarks.rows.build_rows(results)` makes the rows from `run.py`'s results.
"""

import dataclasses

# Targets of issue 6 (2-core machine; ratios from the same run).
ACTOR_VS_ROLLOUT = 0.50
DQN_TO_REVERB = 100_000.0
PPO_E2E_VS_LEARNER = 0.85
DQN_E2E_VS_MIN = 0.50
SOLVE_MP_S = 15.0
SOLVE_LOCAL_S = 3.0
E2E_VS_PEER = 20.0


@dataclasses.dataclass
class Row:
    """One line of the table. `ratio` is figure / ceiling; `target` applies to it
    (kind 'ratio>=') or to the figure itself ('figure>=', 'figure<=')."""

    section: str
    name: str
    figure: float | None
    unit: str
    ceiling: float | None = None
    ceiling_name: str = ""
    target_kind: str = ""  # "" | "ratio>=" | "figure>=" | "figure<="
    target: float | None = None
    note: str = ""

    @property
    def ratio(self) -> float | None:
        if self.figure is None or not self.ceiling:
            return None
        return self.figure / self.ceiling

    @property
    def status(self) -> str:
        if not self.target_kind:
            return ""
        value = self.ratio if self.target_kind == "ratio>=" else self.figure
        if value is None:
            return "MISS"
        ok = value <= self.target if self.target_kind == "figure<=" else value >= self.target
        return "PASS" if ok else "MISS"

    @property
    def target_text(self) -> str:
        if not self.target_kind:
            return ""
        what, op = (
            self.target_kind[:-2],
            self.target_kind[-2:].replace(">=", "≥").replace("<=", "≤"),
        )
        return f"{what} {op} {fmt(self.target, 'x' if what == 'ratio' else self.unit)}"

    def as_dict(self) -> dict:
        return dict(dataclasses.asdict(self), ratio=self.ratio, status=self.status)


def fmt(value, unit: str = "") -> str:
    """1234567 -> '1.23 M', 0.512 -> '0.512', None -> '—'."""
    if value is None:
        return "—"
    if unit == "x":
        return f"{value:.2f}x" if value < 100 else f"{value:,.0f}x"
    if unit == "s":
        return f"{value:.1f} s"
    if unit == "share":
        return f"{100 * value:.0f}%"
    for scale, suffix in ((1e9, " G"), (1e6, " M"), (1e3, " k")):
        if abs(value) >= scale:
            return f"{value / scale:.3g}{suffix}"
    return f"{value:.3g}"


def to_markdown(rows) -> str:
    """The table as GitHub markdown."""
    lines = [
        "| section | row | figure | ceiling | ratio | target | status | details |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        ceiling = f"{fmt(row.ceiling, row.unit)} ({row.ceiling_name})" if row.ceiling else ""
        lines.append(
            f"| {row.section} | {row.name} | {fmt(row.figure, row.unit)} {'' if row.unit == 's' else row.unit} "
            f"| {ceiling} | {fmt(row.ratio, 'x') if row.ratio is not None else ''} "
            f"| {row.target_text} | {row.status} | {row.note} |"
        )
    return "\n".join(lines)
