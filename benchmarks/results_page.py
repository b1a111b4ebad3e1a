"""docs/results.md, written whole by `make results` (`benchmarks/results_tables.py`):
for each suite of `benchmarks/suites.py`, every group of rows that stands for it
(`benchmarks/evidence.py`) with its across-seed figures and its per-seed rows, the
learning curve with its seed band where the rows have one, and the commands that
would measure the suites no row covers yet.
"""

import re

from benchmarks import evidence, suites
from benchmarks.evidence import ROOT
from benchmarks.results_format import fmt, interval, table, to_target_cell, values_of

IMAGES = "img/results"  # under docs/
STUDY_SEEDS = "51,52,53,54,55"

PROTOCOL_TEXT = """\
## How the figures are measured

- **last policy at the budget** (`benchmarks/results/at_budget.csv`, written by
  `python -m benchmarks.suite_results`): every target off, the run ends at its env-step
  budget, and the figure is the policy it ends with, over its final evaluation of
  `evaluator.confirm_envs` episodes (greedy, or sampled where the preset judges its
  sampled policy: the `policy` column). Nothing is kept or selected. Beside it: the env
  steps at which a routine evaluation first reached the preset's target (its mean, or
  its exact share: not a confirmed stop) and the best routine evaluation, which is a
  selected maximum and never the reported figure.
- **last routine evaluation at a fixed budget, target off** (`stability.csv`): the same
  run, but the figure is the last routine evaluation (100 episodes, or the exact success
  on a tabular env), with the second half's mean and lowest evaluation as shares of the
  target.
- **last policy at a study's budget** (`presets.csv`, a study part): target off, the last
  policy over a study's own budget, shorter than the suite's.
- **kept best of the routine evaluations** (`presets.csv`): the policy of the run's best
  evaluation (10 episodes each on MuJoCo), kept by `evaluator.keep_best`: a selected
  maximum, above what the last policy plays.
- **first confirmed crossing of the target** (`presets.csv`): the run stopped at the
  first evaluation whose 95% lower bound reached the target; the figure is that
  confirmed policy's return and the env steps it took. It says how soon, not where a
  run ends.

Across seeds: the mean and the interquartile mean (IQM), each with a 95% percentile
bootstrap interval over seeds (10,000 resamples, a fixed seed: `benchmarks/aggregate.py`).
An interval of 3 seeds is wide and itself uncertain; a row with fewer than 5 says so.
Exact suites (tabular envs) give the exact success of the policy as a share of the
optimum's (`distrl/envs/exact.py`). Published figures are other people's, each with its
source; the env versions and evaluation rules differ where the source says so.
"""


def _slug(text: str) -> str:
    return re.sub(r"[^\w.-]+", "_", text)


def image_name(group) -> str:
    return f"{IMAGES}/{_slug(group.suite)}-{_slug(group.study)}-{group.mode}.png"


def curve_runs(group, results=evidence.RESULTS) -> dict:
    """{seed: [(env steps, return, exact share)]} of an at_budget group's curve rows."""
    runs = {}
    for row in evidence.read(f"curves/{group.study}", results):
        if row["suite"] == group.suite and evidence.MODES[row["mode"]] == group.mode:
            point = (float(row["env_steps"]), evidence.number(row["mean_return"]))
            runs.setdefault(int(row["seed"]), []).append(
                (*point, evidence.number(row["exact_ratio"]))
            )
    return runs


def command(suite) -> str:
    """The command that measures a suite (one mode at a time)."""
    return (
        f"`python -m benchmarks.suite_results --suites={suite.name} --seeds={STUDY_SEEDS} "
        f"--mode=single|distributed --study=<study>`"
    )


def _not_measured(found) -> str:
    """The suites with no rows, then the non-tabular ones whose rows hold no last policy
    at a budget on FEWER seeds or more, each with the command that measures it."""
    missing = [suite for suite in suites.SUITES if not found[suite.name]]
    short = [
        s for s in suites.SUITES if found[s.name] and not (s.exact or _last_on_five(found[s.name]))
    ]
    lines = ["## Not measured yet", ""]
    for title, listed in (
        ("Suites no row covers", missing),
        (f"Suites with no last policy at a budget on {evidence.FEWER} seeds", short),
    ):
        lines += [f"{title}: {'none' if not listed else 'each is measured by:'}", ""]
        for suite in listed:
            budget = evidence.steps(suite.budget)
            lines.append(f"- `{suite.name}` ({suite.env}, {budget}): {command(suite)}")
        lines += [""] if listed else []
    return "\n".join(lines).rstrip()


def _last_on_five(groups) -> bool:
    last = (evidence.LAST, evidence.LAST_EVALUATION, evidence.LAST_STUDY)
    return any(g.protocol in last and len(g.seeds) >= evidence.FEWER for g in groups)


def _seed_table(suite, group) -> str:
    """The group's rows, one per seed, in its file's own terms."""
    rows = []
    for row, value in zip(group.rows, group.values):
        common = [row["seed"], fmt(value, suite.exact)]
        tail = [row.get("seconds", ""), row.get("load", ""), row["commit"]]
        if group.source == "at_budget.csv":
            ci = f"[{row['final_low']}, {row['final_high']}] / {row['final_episodes']}"
            ci += f", {row['policy']}"
            best = f"{row['best_return']} at {row['best_env_steps']}" if row["best_return"] else "—"
            rows.append(
                common + [ci, row["env_steps"], row["env_steps_to_target"] or "—", best, *tail]
            )
        elif group.source == "stability.csv":
            rows.append(common + [row["mean"] or "—", row["min"], row["ok"], *tail])
        else:
            rows.append(common + [row["env_steps"], row["stop"], *tail, row["config"]])
    extra = {
        "at_budget.csv": [
            "return's 95% CI / episodes, policy",
            "env steps",
            "to target",
            "best evaluation",
        ],
        "stability.csv": ["second-half mean (share)", "lowest (share)", "goal met"],
        "presets.csv": ["env steps", "stop"],
    }[group.source]
    header = ["seed", "final", *extra, "seconds", "load", "commit"]
    return table(header + ["as the row names it"] * (group.source == "presets.csv"), rows)


def _group_section(suite, group, results) -> str:
    values = values_of(group)
    summary = (
        f"{len(group.seeds)} seeds ({', '.join(map(str, group.seeds))}); mean "
        f"{interval(values, suite.exact)}, IQM {interval(values, suite.exact, 'iqm')}; env "
        f"steps to the target: {to_target_cell(group)}. Rows: `{group.source}`, study "
        f"`{group.study}`."
    )
    budget = f", {group.budget}" if group.budget else ""
    title = f"### {group.protocol}: {group.mode}{budget} (`{group.study}`)"
    parts = [title, summary, _seed_table(suite, group)]
    if group.source == "at_budget.csv" and curve_runs(group, results):
        parts.append(f"![{group.suite}, {group.study}, {group.mode}]({image_name(group)})")
    return "\n\n".join(parts)


def _suite_section(suite, groups, results) -> str:
    published = suite.published + (f"; source: {suite.source}" if suite.source else "")
    head = [
        f"## `{suite.name}`: {suite.env}",
        f"`configs/{suite.config}.py`"
        + "".join(f", `--config.{k}={v}`" for k, v in suite.overrides)
        + f"; the suite's budget {evidence.steps(suite.budget)} env steps; published: {published}.",
    ]
    return "\n\n".join(head + [_group_section(suite, g, results) for g in groups])


def _parity_cell(rows, program: str, seed: str) -> str:
    """One run's last-policy return and its interval, or "—"."""
    r = next((r for r in rows if (r["program"], r["seed"]) == (program, seed)), None)
    if r is None:
        return "—"
    low, high = (fmt(float(r[k]), False) for k in ("return_low", "return_high"))
    return f"{fmt(float(r['mean_return']), False)} [{low}, {high}]"


def parity_section(results=evidence.RESULTS) -> str:
    """ "Per-step parity with a peer" from parity.csv (`benchmarks/parity.py`): per study,
    each seed's last-policy return for distrl.local and the fused loop, and each
    program's across-seed mean with its interval; "" without rows."""
    found = evidence.read("parity", results)
    parts = []
    for study in dict.fromkeys(r["study"] for r in found):
        rows = [r for r in found if r["study"] == study]
        first = rows[0]
        programs = list(dict.fromkeys(r["program"] for r in rows))
        seeds = list(dict.fromkeys(r["seed"] for r in rows))
        returns = {
            p: [float(r["mean_return"]) for r in rows if r["program"] == p] for p in programs
        }
        cells = [[s, *(_parity_cell(rows, p, s) for p in programs)] for s in seeds]
        cells.append(["across seeds", *(interval(returns[p], False) for p in programs)])
        parts += [
            f"### `{first['config']}` at {evidence.steps(int(first['env_steps']))} env steps "
            f"(`{study}`, {first['commit']}, "
            f"{' '.join(dict.fromkeys((first['platform'], first['device'])))})",
            f"Each run's last policy over {first['episodes']} episodes (its 95% interval); "
            f"across seeds: the mean, its 95% bootstrap interval. Measured by "
            f"`{first['command'].rsplit(' --seeds', 1)[0]}`.",
            table(["seed", *programs], cells),
        ]
    if not parts:
        return ""
    head = (
        "## Per-step parity with a peer\n\n`distrl.local` against the fused one-file PPO "
        "loop (`benchmarks/fused_ppo.py`): the same seed, env, network and settings, the "
        "same iterations, each last policy played by the same evaluation."
    )
    return "\n\n".join([head, *parts])


def page(found, results=evidence.RESULTS) -> str:
    """docs/results.md's text."""
    parts = [
        "# Results, per suite and seed",
        "Generated by `make results` (`benchmarks/results_tables.py`) from "
        "[benchmarks/results/](../benchmarks/results/README.md): do not edit; change the "
        "rows, then run `make results`. The summary is README's table.",
        PROTOCOL_TEXT.rstrip(),
        _not_measured(found),
    ]
    for suite in suites.SUITES:
        if found[suite.name]:
            parts.append(_suite_section(suite, found[suite.name], results))
    parity = parity_section(results)
    return "\n\n".join(parts + [parity] * bool(parity)) + "\n"


def draw_curves(found, results=evidence.RESULTS, docs=ROOT / "docs") -> list:
    """The learning curve (mean over seeds, min-max band) of each at_budget group with
    curve rows, as a PNG under docs/img/results/; returns the paths."""
    from distrl.analysis import plots  # noqa: PLC0415 - matplotlib only when drawing

    paths = []
    for suite in suites.SUITES:
        for group in found[suite.name]:
            runs = curve_runs(group, results)
            if group.source != "at_budget.csv" or not runs:
                continue
            column = 2 if suite.exact else 1
            curves = {
                group.suite: [
                    {"env_steps": [p[0] for p in r], "y": [p[column] for p in r]}
                    for r in runs.values()
                    if len(r) > 1
                ]
            }
            path = docs / image_name(group)
            path.parent.mkdir(parents=True, exist_ok=True)
            label = "exact success / optimum" if suite.exact else "mean return (evaluation)"
            title = f"{group.suite} on {suite.env}, {group.mode}, {len(runs)} seeds ({group.study})"
            plots.plot_comparison(
                curves, (("env_steps", "env steps"),), title, str(path), panels=(("y", label),)
            )
            paths.append(path)
    return paths
