"""What the rows of benchmarks/results/ say about each suite (`benchmarks/suites.py`):
per-seed values grouped by how they were measured, read back from the CSVs for the
tables `benchmarks/results_tables.py` writes.

Three files hold learning results. `at_budget.csv` (`benchmarks/suite_results.py`)
is the protocol: the last policy at the budget, every row of a suite read. The two
older files were typed from the prose the docs used to hold, so `SELECTIONS` names
which of their studies still stand for a preset as it is now, and under which
protocol they were measured; their cells are read as they were written ("1.51M",
"253,952", "99.6%", "2.51 [2.48, 2.54]").
"""

import csv
import pathlib
import re
from typing import NamedTuple

from benchmarks import suites

ROOT = pathlib.Path(__file__).resolve().parent.parent  # no distrl import: the docs test reads it
RESULTS = ROOT / "benchmarks" / "results"
FEWER = 5  # seeds below which a group says so, and a suite's figure comes from another

# How a group of rows was measured, from the most to the least demanding: the README
# shows a suite's first one here that has rows.
LAST = "last policy at the budget"
LAST_EVALUATION = "last routine evaluation at a fixed budget, target off"
LAST_STUDY = "last policy at a study's budget, target off"
KEPT = "kept best of the routine evaluations"
FIRST = "first confirmed crossing of the target, target on"
PROTOCOLS = (LAST, LAST_EVALUATION, LAST_STUDY, KEPT, FIRST)
SHORT = {
    LAST: "last policy",
    LAST_EVALUATION: "last evaluation, target off",
    LAST_STUDY: "last policy, study budget",
    KEPT: "kept best",
    FIRST: "first crossing, confirmed",
}


class Selection(NamedTuple):
    """Rows of an older file that stand for a suite: `study` and `config` match the
    row's columns exactly; `variant` too where the file has one; seeds: () for all."""

    suite: str
    file: str  # "presets" or "stability"
    study: str
    config: str
    protocol: str
    variant: str = ""
    seeds: tuple = ()
    note_has: str = ""  # presets.csv: a text the row's note holds (e.g. the env)
    commit: str = ""  # where the same seeds ran at two commits: the one that stands


_UNSEEN = (41, 42, 43, 44, 45)
_STAY = (51, 52, 53, 54, 55)
_L2 = "the preset (L2 loss, step size to 0 over 1.5M: 28eadaa)"
_HALFCHEETAH_STEPS = "{} (gymnasium:HalfCheetah-v5; study part halfcheetah_steps)"
_R2D2 = "r2d2_{} (GRU 64; sequences of 32 every 16 steps; {}target {})"
SELECTIONS = (
    *(
        Selection(f"{a}_slippery8x8", "stability", "issue30-item2-seeds-41-45", f"{a}_slippery8x8",
                  LAST_EVALUATION, "the preset")
        for a in ("dqn", "ppo", "a2c")
    ),
    *(
        Selection(f"{a}_slippery8x8", "presets", "issue30-unseen-seeds-41-45", f"{a}_slippery8x8",
                  FIRST)
        for a in ("dqn", "ppo", "a2c")
    ),
    *(
        Selection(name, "stability", "issue37-stay-learned", name, LAST_EVALUATION, "the preset",
                  _STAY)
        for name in ("ppo_cartpole", "dqn_cartpole", "ppo_gymnasium_cartpole", "dqn_breakout",
                     "ppo_spaceinvaders", "ppo_breakout")
    ),
    Selection("dqn_gymnasium_cartpole", "stability", "issue37-stay-learned",
              "dqn_gymnasium_cartpole", LAST_EVALUATION, _L2, _STAY),
    Selection("dqn_gymnasium_cartpole", "presets", "issue37-stay-learned",
              "dqn_gymnasium_cartpole (L2 loss, step size to 0 over 1.5M)", FIRST),
    Selection("ppo_gymnasium_cartpole", "presets", "issue27-ppo-gymnasium-cartpole",
              "ppo_gymnasium_cartpole", FIRST),
    Selection("ppo_cartpole", "presets", "issue37-stay-learned", "ppo_cartpole", FIRST),
    Selection("dqn_cartpole", "presets", "issue37-stay-learned", "dqn_cartpole", FIRST),
    Selection("dqn_breakout", "presets", "issue37-breakout",
              "dqn_breakout (MinAtar's conv DQN; target 10)", FIRST),
    Selection("ppo_spaceinvaders", "presets", "issue37-spaceinvaders",
              "ppo_spaceinvaders (ppo_breakout settings; target 131, gymnax PPO)", FIRST),
    Selection("ppo_breakout", "presets", "issue37-breakout",
              "ppo_breakout (ReLU MLP 2x256; sampled evaluation; target 28)", FIRST),
    Selection("ppo_breakout", "presets", "issue37-breakout-greedy",
              "ppo_breakout judged on its greedy policy (--config.evaluator.sampled=False; "
              "target 28)", FIRST),
    Selection("tabular_gymnasium_taxi", "presets", "issue27-toy-text", "tabular_gymnasium_taxi",
              FIRST),
    Selection("ppo_gymnasium_taxi", "presets", "issue27-toy-text", "ppo_gymnasium_taxi", FIRST),
    Selection("ppo_gymnasium_frozenlake8x8", "presets", "issue27-toy-text",
              "ppo_gymnasium_frozenlake8x8", FIRST, commit="023d11b"),
    *(
        Selection(f"{a}_mujoco", "presets", "issue36-study-halfcheetah",
                  _HALFCHEETAH_STEPS.format(f"{a}_mujoco"), LAST_STUDY)
        for a in ("sac", "td3", "ppo")
    ),
    Selection("ppo_mujoco", "presets", "issue36-ppo-mujoco-1m",
              "ppo_mujoco (no value clip, observations standardised (the preset now))", KEPT,
              note_has="HalfCheetah-v5"),
    Selection("ppo_mujoco@Hopper", "presets", "issue36-ppo-mujoco-1m",
              "ppo_mujoco (no value clip, observations standardised (the preset now))", KEPT,
              note_has="Hopper-v5"),
    Selection("ppo_memory_chain", "presets", "issue39-recurrent-presets",
              "ppo_memory_chain (GRU 128; memory_length 10; target 0.9)", FIRST),
    Selection("ppo_masked_cartpole", "presets", "issue39-recurrent-presets",
              "ppo_masked_cartpole (GRU 128; velocities hidden; target 475)", FIRST),
    Selection("r2d2_memory_chain", "presets", "issue39-r2d2",
              _R2D2.format("memory_chain", "memory_length 10; ", "0.9"), FIRST),
    Selection("r2d2_masked_cartpole", "presets", "issue39-r2d2",
              _R2D2.format("masked_cartpole", "velocities hidden; ", "475"), FIRST),
)  # fmt: skip


class Group(NamedTuple):
    """One suite's rows of one study, mode and protocol."""

    suite: str
    protocol: str
    study: str
    mode: str  # "single" or "distributed"
    source: str  # the file, e.g. "stability.csv"
    budget: str  # as the rows give it ("" where it is the target's stop)
    seeds: tuple  # ints
    values: tuple  # floats: a return, or a share of the optimum (exact suites)
    to_target: tuple  # env steps to the target per seed (None: not reached, or none)
    rows: tuple  # the CSV rows (dicts)


_NUMBER = re.compile(r"[-+]?\d[\d,]*\.?\d*|[-+]?\.\d+")


def number(text: str):
    """The first number of a cell as written ("1.51M", "741k", "253,952", "99.6%" ->
    0.996, "2.51 [2.48, 2.54]" -> 2.51, "+7.930 (100%)" -> 7.93); None if none."""
    match = _NUMBER.search(text or "")
    if not match:
        return None
    value = float(match.group().replace(",", ""))
    tail = text[match.end() : match.end() + 1]
    return value * {"M": 1e6, "k": 1e3, "%": 0.01}.get(tail, 1.0)


def percent(text: str):
    """The share a cell writes as a percentage: "98.4%", "0.879 (101.8%)" -> 1.018."""
    inside = re.search(r"\(([^)]*%)\)", text or "")
    return number(inside.group(1) if inside else text) if "%" in (text or "") else None


def read(name: str, root=RESULTS) -> list:
    """The rows of `<root>/<name>.csv` as dicts ([] when the file does not exist)."""
    path = root / f"{name}.csv"
    if not path.exists():
        return []
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


MODES = {"single process": "single", "distributed": "distributed", "single": "single"}


def mode_of(row) -> str:
    """ "single" or "distributed" (older rows write "single process")."""
    return MODES[row["mode"]]


def steps(x: float) -> str:
    """Env steps in a few characters: 950, 50k, 1.2M."""
    for scale, suffix in ((1e6, "M"), (1e3, "k")):
        if abs(x) >= scale:
            return f"{x / scale:.3g}{suffix}"
    return f"{x:.0f}"


def _budget(row) -> str:
    """The fixed budget an older row ran to, as its note or stop gives it: "4M env
    steps", a --env_steps flag, the env steps of a run that ended on its env-step
    budget, a --seconds flag; "" when it stopped at its target."""
    note = row.get("note", "")
    found = re.search(r"(\d+(?:\.\d+)?M) env steps", note)
    if found:
        return found.group(1)
    found = re.search(r"--env_steps=([1-9]\d*)", note)
    if found:
        return steps(int(found.group(1)))
    if row.get("stop") == "env_step_budget":
        return steps(float(f"{number(row['env_steps']):.2g}"))
    found = re.search(r"--(?:config\.budget\.)?seconds=([1-9]\d*)", note)
    return f"{found.group(1)} s" if found else ""


def _reference(row):
    """What a stability.csv row's shares are of: a return target, or None (the optimum)."""
    found = re.search(r"shares of (-?[\d.]+)", row.get("note", ""))
    return float(found.group(1)) if found else None


def value(row, file: str, exact: bool):
    """A row's figure: the exact share of the optimum (exact suites), else a return."""
    if file == "at_budget":
        return number(row["final_exact"] if exact else row["final_return"])
    if file == "stability":
        share = number(row["final"])
        return share if exact else share * _reference(row)
    return percent(row["exact"]) if exact else number(row["final_return"])


def _to_target(row, file: str):
    if file == "at_budget":
        return number(row["env_steps_to_target"])
    if file == "presets" and row["stop"] == "target_reached":
        return number(row["env_steps"])
    return None


def _matches(row, s: Selection) -> bool:
    return (
        row["study"] == s.study
        and row["config"] == s.config
        and (not s.variant or row.get("variant") == s.variant)
        and (not s.seeds or int(row["seed"]) in s.seeds)
        and s.note_has in row.get("note", "")
        and (not s.commit or row["commit"] == s.commit)
        and row["mode"] in MODES
    )


def _group(suite, protocol, study, file, rows) -> Group:
    rows = sorted(rows, key=lambda r: int(r["seed"]))
    budget = rows[0]["budget"] if file == "at_budget" else _budget(rows[0]) * (protocol != FIRST)
    return Group(
        suite=suite.name,
        protocol=protocol,
        study=study,
        mode=mode_of(rows[0]),
        source=f"{file}.csv",
        budget=steps(int(budget)) if file == "at_budget" else budget,
        seeds=tuple(int(r["seed"]) for r in rows),
        values=tuple(value(r, file, suite.exact) for r in rows),
        to_target=tuple(_to_target(r, file) for r in rows),
        rows=tuple(rows),
    )


def _by_mode(rows) -> dict:
    out = {}
    for row in rows:
        out.setdefault(mode_of(row), []).append(row)
    return out


def groups(suite, root=RESULTS) -> list:
    """Every group of rows that stands for `suite`: its at_budget.csv rows by study
    and mode, then its SELECTIONS, in PROTOCOLS order; within a protocol a group of
    FEWER seeds or more first, then distributed before single."""
    found = []
    measured = {}
    for row in read("at_budget", root):
        if row["suite"] == suite.name:
            measured.setdefault((row["study"], mode_of(row)), []).append(row)
    for (study, _), rows in measured.items():
        found.append(_group(suite, LAST, study, "at_budget", rows))
    for s in SELECTIONS:
        if s.suite == suite.name:
            chosen = [r for r in read(s.file, root) if _matches(r, s)]
            for rows in _by_mode(chosen).values():
                found.append(_group(suite, s.protocol, s.study, s.file, rows))
    return sorted(found, key=_demand)


def _demand(group) -> tuple:
    """A group's place among a suite's: the lower, the more its figure is worth."""
    n = len(group.seeds)
    return (PROTOCOLS.index(group.protocol), n < FEWER, group.mode != "distributed", -n)


def all_groups(root=RESULTS) -> dict:
    """{suite name: its groups} for every suite of `benchmarks/suites.py`."""
    return {suite.name: groups(suite, root) for suite in suites.SUITES}
