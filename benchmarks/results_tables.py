"""`make results`: every results table of README.md and docs/learning.md, and the whole
of docs/results.md with its curves, written from the rows of benchmarks/results/
(`benchmarks/evidence.py` reads them), so that no figure is typed by hand.

A table lives in its doc between `<!-- results:NAME -->` and `<!-- /results:NAME -->`;
everything between the two marks is this module's. `tests/test_docs.py` renders every
table in memory and fails, naming it, when a committed one differs; the curve images
are drawn here too but not compared (PNG bytes vary across matplotlib builds).

    .venv/bin/python -m benchmarks.results_tables           # rewrite the docs and images
    .venv/bin/python -m benchmarks.results_tables --check   # exit 1 naming stale tables
"""

import re
import sys

from benchmarks import evidence, results_page, suites
from benchmarks.evidence import ROOT
from benchmarks.results_format import (
    interval,
    seeds_cell,
    short_of,
    table,
    to_target_cell,
    values_of,
)

REGION = re.compile(
    r"(?P<open><!-- results:(?P<name>[\w-]+) -->\n)(?P<body>.*?)"
    r"(?P<close><!-- /results:(?P=name) -->)",
    re.DOTALL,
)
DOCS = ("README.md", "docs/learning.md", "docs/tests.md")
PAGE = "docs/results.md"


def _sources(chosen) -> dict:
    """{source text: its footnote number}, in the order the suites cite them."""
    numbers = {}
    for suite in chosen:
        if suite.source and suite.source not in numbers:
            numbers[suite.source] = len(numbers) + 1
    return numbers


def suites_table(found) -> str:
    """README's table: one row per suite, from its most demanding group of rows."""
    notes = _sources(suites.SUITES)
    rows = []
    for suite in suites.SUITES:
        best = (found[suite.name] or [None])[0]
        published = suite.published + (f" [{notes[suite.source]}]" if suite.source else "")
        if best is None:
            rows.append(
                [f"`{suite.name}`", suite.env, evidence.steps(suite.budget), "not measured"]
            )
            rows[-1] += ["—", "—", published]
            continue
        suite_budget = evidence.steps(suite.budget)
        budget = best.budget or "to the target"
        budget += f" (suite: {suite_budget})" * (best.budget not in ("", suite_budget))
        value = interval(values_of(best), suite.exact)
        value += " of the optimum" * (suite.exact and value != "—")
        short = short_of(values_of(best), suite.published, suite.exact)
        value += ", short of the published" * (best.budget == suite_budget and short)
        rows.append([f"`{suite.name}`", suite.env, budget, value, seeds_cell(best)])
        rows[-1] += [evidence.SHORT[best.protocol], published]
    header = ["suite", "env", "budget", "final: mean [95% CI]", "seeds, mode", "measured as"]
    legend = "\n".join(f"- [{n}] {source}" for source, n in notes.items())
    return table([*header, "published"], rows) + "\n\n" + legend


def _groups_table(found, protocols, columns) -> str:
    rows = []
    for suite in suites.SUITES:
        for group in found[suite.name]:
            if group.protocol in protocols:
                rows.append([f"`{suite.name}`", *(cell(suite, group) for _, cell in columns)])
    return table(["suite", *(name for name, _ in columns)], rows)


def _second_half(group, key: str) -> str:
    shares = [evidence.number(r[key]) for r in group.rows]
    return f"{min(shares):.3g}-{max(shares):.3g}"


STAY_COLUMNS = (
    ("mode", lambda s, g: g.mode),
    ("budget", lambda s, g: g.budget),
    ("seeds", lambda s, g: ", ".join(map(str, g.seeds))),
    ("last evaluation: mean [95% CI]", lambda s, g: interval(values_of(g), s.exact)),
    (
        "second-half mean (share)",
        lambda s, g: _second_half(g, "mean") if g.rows[0]["mean"] else "—",
    ),
    ("lowest evaluation (share)", lambda s, g: _second_half(g, "min")),
    ("goal met", lambda s, g: f"{sum(r['ok'] == 'yes' for r in g.rows)} of {len(g.rows)}"),
    ("study", lambda s, g: f"`{g.study}`"),
)
TARGET_COLUMNS = (
    ("mode", lambda s, g: g.mode),
    ("seeds", lambda s, g: ", ".join(map(str, g.seeds))),
    ("env steps to the target: median [range]", lambda s, g: to_target_cell(g)),
    ("confirmed policy: mean [95% CI]", lambda s, g: interval(values_of(g), s.exact)),
    ("study", lambda s, g: f"`{g.study}`"),
)
BUDGET_COLUMNS = (
    ("measured as", lambda s, g: evidence.SHORT[g.protocol]),
    ("mode", lambda s, g: g.mode),
    ("budget", lambda s, g: g.budget),
    ("seeds", lambda s, g: len(g.seeds)),
    ("mean [95% CI]", lambda s, g: interval(values_of(g), s.exact)),
    ("IQM [95% CI]", lambda s, g: interval(values_of(g), s.exact, "iqm")),
    ("env steps to the target", lambda s, g: to_target_cell(g)),
    ("study", lambda s, g: f"`{g.study}`"),
)


def suite_costs_table(results=evidence.RESULTS) -> str:
    """docs/tests.md's table: every run of the test suite in suite.csv, newest first."""
    rows = [
        [f"`{r['study']}`", r["commit"], r["command"], r["selection"], r["passed"] or "—"]
        + [r["failed"] or "—", r["pytest_s"], r["total_s"], r["load"]]
        for r in reversed(evidence.read("suite", results))
    ]
    header = ["study", "commit", "command", "tests", "passed", "failed", "pytest s", "in all s"]
    return table([*header, "load"], rows)


def accelerator_table(results=evidence.RESULTS) -> str:
    """README's "On an accelerator": each case the chip ran (learner_devices.csv,
    benchmarks/accelerator.py), its learner updates/s on the chip at K=1 and the largest
    K, resident and fed from the host, beside the chip host's CPU (the CPU passes of the
    device machine's calls): each figure the newest row of its kind, the commit of the
    chip's K=1 row beside it."""
    found = evidence.read("learner_devices", results)
    chips = [r for r in found if r["platform"] in ("tpu", "gpu")]
    if not chips:
        return table(["preset", "batch"], [])
    chip, device = chips[-1]["platform"], chips[-1]["device"]
    k = max(int(r["updates_per_call"]) for r in chips)
    chip_commits = {r["commit"] for r in chips}
    newest = {}  # in file order: a later row of a kind replaces an earlier one
    for r in found:
        if r["platform"] == chip or (r["platform"] == "cpu" and r["commit"] in chip_commits):
            newest[(r["platform"], r["preset"], r["figure"], int(r["updates_per_call"]))] = r

    def rate(platform, preset, figure, per_call):
        r = newest.get((platform, preset, figure, per_call))
        return f"{float(r['updates_per_s']):,.0f}" if r else "—"

    cases = dict.fromkeys((r["preset"], r["batch"]) for r in chips if r["device"] == device)
    rows = [
        [f"`{preset}`", batch, newest[(chip, preset, "resident", 1)]["commit"]]
        + [rate(chip, preset, figure, n) for n in (1, k) for figure in ("resident", "fed")]
        + [rate("cpu", preset, "resident", n) for n in (1, k)]
        for preset, batch in cases
        if not preset.startswith("dqn_td")
    ]
    header = ["preset", "batch", "at", f"{device}, K=1", "K=1, fed", f"K={k}"]
    return table([*header, f"K={k}, fed", "its host's CPU, K=1", f"CPU, K={k}"], rows)


def tables(found, results=evidence.RESULTS) -> dict:
    """{region name: its markdown} for the DOCS."""
    return {
        "suite-costs": suite_costs_table(results),
        "accelerator": accelerator_table(results),
        "suites": suites_table(found),
        "stay-learned": _groups_table(found, (evidence.LAST_EVALUATION,), STAY_COLUMNS),
        "to-target": _groups_table(found, (evidence.FIRST,), TARGET_COLUMNS),
        "at-budget": _groups_table(
            found, (evidence.LAST, evidence.LAST_STUDY, evidence.KEPT), BUDGET_COLUMNS
        ),
    }


def fill(text: str, generated: dict, where: str) -> str:
    """`text` with every marked region's body replaced by its table; a region this
    module does not write is an error naming it."""

    def body(match):
        name = match.group("name")
        if name not in generated:
            raise KeyError(f"{where}: no table named {name!r} (known: {', '.join(generated)})")
        return match.group("open") + generated[name] + "\n" + match.group("close")

    return REGION.sub(body, text)


def render(root=ROOT, results=evidence.RESULTS) -> dict:
    """{doc path relative to root: its text as `make results` writes it}."""
    found = evidence.all_groups(results)
    generated = tables(found, results)
    out = {doc: fill((root / doc).read_text(encoding="utf-8"), generated, doc) for doc in DOCS}
    out[PAGE] = results_page.page(found, results)
    return out


def stale(root=ROOT, results=evidence.RESULTS) -> list:
    """'doc: table' for each generated table whose committed text differs."""
    found = []
    for doc, text in render(root, results).items():
        path = root / doc
        old = path.read_text(encoding="utf-8") if path.exists() else ""
        if doc == PAGE:
            found += [f"{doc} (the whole page)"] * (old != text)
            continue
        new_bodies = {m.group("name"): m.group("body") for m in REGION.finditer(text)}
        for m in REGION.finditer(old):
            if new_bodies.get(m.group("name")) != m.group("body"):
                found.append(f"{doc}: {m.group('name')}")
    return found


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["--check"]:
        differ = stale()
        for name in differ:
            print(f"results: stale table {name}: run `make results`")
        return 1 if differ else 0
    if argv:
        print(__doc__)
        return 2
    for doc, text in render().items():
        (ROOT / doc).write_text(text, encoding="utf-8")
        print(f"results: wrote {doc}")
    for path in results_page.draw_curves(evidence.all_groups()):
        print(f"results: drew {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
