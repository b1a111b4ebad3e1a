"""The docs stay within their limits, the measurement history is data tied to commits,
the results tables are what `make results` writes from that data, and the docs'
relative links resolve (issue 38 item 1).

README.md is the user's guide, WORKSPACE.md the map, benchmarks/README.md how to run
the benchmarks and their current figures: each has a line limit, and what does not
fit goes where it belongs (named in the failure). benchmarks/results/*.csv hold every
earlier measurement, one row each, with the commit it ran on.
"""

import csv
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"

# doc -> (line limit, where the overflow goes)
LIMITS = {
    "README.md": (300, "docs/usage.md (detail behind the user's guide) or the docs/*.md it links"),
    "WORKSPACE.md": (450, "docs/decisions.md (each decision in force, in short) or docs/tests.md"),
    "benchmarks/README.md": (
        400,
        "benchmarks/results/*.csv (older measurements as rows, each with its commit) "
        "and docs/decisions.md or docs/learning.md (explanations)",
    ),
}
# Docs whose relative links must resolve.
LINKED = (
    "README.md",
    "WORKSPACE.md",
    "benchmarks/README.md",
    "benchmarks/results/README.md",
    "docs/results.md",
)
# recorded: the command that measured the row wrote HEAD (benchmarks/suite_results.py)
COMMIT_SOURCES = {"named", "added_in", "parent_of_named", "recorded"}
HEX = re.compile(r"[0-9a-f]{7,40}")
# [text](target) or [text](target "title"); images too.
LINK = re.compile(r"\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def _line_count(path: pathlib.Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


@pytest.mark.parametrize("doc", sorted(LIMITS))
def test_doc_within_its_line_limit(doc):
    limit, overflow = LIMITS[doc]
    lines = _line_count(ROOT / doc)
    assert lines <= limit, (
        f"{doc} has {lines} lines, over its limit of {limit} by {lines - limit}: "
        f"move the detail to {overflow}, and link to it"
    )


def test_line_limit_failure_names_file_count_limit_and_place(tmp_path, monkeypatch):
    """The check itself: a doc one line over fails with a message a reader can act on."""
    (tmp_path / "README.md").write_text("line\n" * 301, encoding="utf-8")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    with pytest.raises(AssertionError) as failure:
        test_doc_within_its_line_limit("README.md")
    message = str(failure.value)
    for part in ("README.md", "301 lines", "limit of 300", "docs/usage.md"):
        assert part in message, message


def _results_files():
    files = sorted(RESULTS.glob("*.csv"))
    assert files, f"no measurement history in {RESULTS.relative_to(ROOT)}/*.csv"
    return files


def _read(path: pathlib.Path):
    with path.open(newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f, strict=True))
    assert rows, f"{path.name} is empty"
    header, body = rows[0], rows[1:]
    assert body, f"{path.name} has a header and no rows"
    for number, row in enumerate(body, start=2):
        assert len(row) == len(header), (
            f"{path.name} line {number}: {len(row)} fields, header has {len(header)}"
        )
    return [dict(zip(header, row, strict=True)) for row in body], header


def test_results_parse_with_a_commit_per_row():
    for path in _results_files():
        rows, header = _read(path)
        for column in ("commit", "commit_source"):
            assert column in header, f"{path.name} has no {column!r} column: {header}"
        for number, row in enumerate(rows, start=2):
            assert HEX.fullmatch(row["commit"]), (
                f"{path.name} line {number}: commit {row['commit']!r} is not a 7-40 digit hex sha"
            )
            assert row["commit_source"] in COMMIT_SOURCES, (
                f"{path.name} line {number}: commit_source {row['commit_source']!r}, "
                f"valid: {sorted(COMMIT_SOURCES)}"
            )


def test_results_tables_are_what_make_results_writes():
    """Every table between `<!-- results:NAME -->` marks in README.md and
    docs/learning.md, and docs/results.md whole, as benchmarks/results_tables.py renders
    them from the rows, in memory. The curve images are not compared: their PNG bytes
    depend on the matplotlib build that drew them."""
    from benchmarks import evidence, results_tables  # noqa: PLC0415 - this test's alone

    stale = results_tables.stale()
    assert not stale, (
        f"generated from benchmarks/results/*.csv, these differ from what is committed: "
        f"{', '.join(stale)}; run `make results` and commit the result (never edit them)"
    )
    marked = set()
    for doc in results_tables.DOCS:
        text = (ROOT / doc).read_text(encoding="utf-8")
        marked |= {m.group("name") for m in results_tables.REGION.finditer(text)}
    generated = set(results_tables.tables(evidence.all_groups()))
    assert generated <= marked, f"tables no doc shows: {sorted(generated - marked)}"


def _in_git_checkout() -> bool:
    try:
        done = subprocess.run(
            ["git", "rev-parse", "--is-inside-work-tree"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
    except FileNotFoundError:  # no git at all
        return False
    return done.returncode == 0 and done.stdout.strip() == "true"


def test_results_commits_exist_in_history():
    if not _in_git_checkout():
        pytest.skip("not a git checkout: the commits cannot be looked up")
    shallow = subprocess.run(
        ["git", "rev-parse", "--is-shallow-repository"], cwd=ROOT, capture_output=True, text=True
    )
    if shallow.stdout.strip() == "true":
        pytest.skip("a shallow clone lacks older commits: git fetch --unshallow to check them")
    commits = {}
    for path in _results_files():
        rows, _ = _read(path)
        for row in rows:
            commits.setdefault(row["commit"], path.name)
    missing = []
    for sha, where in sorted(commits.items()):
        command = ["git", "cat-file", "-e", f"{sha}^{{commit}}"]
        found = subprocess.run(command, cwd=ROOT, capture_output=True, check=False)
        if found.returncode != 0:
            missing.append(f"{sha} ({where})")
    assert not missing, f"commits not in this repository's history: {', '.join(missing)}"


def _relative_links(doc: str):
    text = FENCE.sub("", (ROOT / doc).read_text(encoding="utf-8"))
    for target in LINK.findall(text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue  # a URL (https:, mailto:) or an anchor in the same file
        yield target


@pytest.mark.parametrize("doc", LINKED)
def test_relative_links_resolve(doc):
    base = (ROOT / doc).parent
    broken = [t for t in _relative_links(doc) if not (base / t.split("#", 1)[0]).exists()]
    assert not broken, f"{doc} links to missing files: {broken}"


def test_link_check_sees_links(tmp_path, monkeypatch):
    """The check itself: links in fenced code are ignored, others are found."""
    (tmp_path / "d.md").write_text(
        "[a](x.md) [b](https://example.org) [c](#here) [d](sub/y.md#part)\n"
        "```\n[e](in_code.md)\n```\n",
        encoding="utf-8",
    )
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert list(_relative_links("d.md")) == ["x.md", "sub/y.md#part"]
    with pytest.raises(AssertionError, match=r"d\.md links to missing files"):
        test_relative_links_resolve("d.md")
