"""The results pipeline: the across-seed figures (known answers), the rows read back
from the CSVs as they were written, the suite runner's rows from real (tiny) runs, and
the generator's tables, regions and curves (benchmarks/aggregate.py, evidence.py,
suite_results.py, results_tables.py, results_page.py)."""

import csv
import pathlib
import re

import numpy as np
import pytest

from benchmarks import aggregate, evidence, results_page, results_tables, suite_results, suites


def test_iqm_cuts_a_quarter_off_each_end():
    assert aggregate.iqm([1, 2, 3, 4]) == 2.5
    assert aggregate.iqm([5, 1, 4, 2, 3]) == 3.0  # unsorted; int(5 / 4) = 1 cut each end
    assert aggregate.iqm([0, 0, 0, 100]) == 0.0  # the outlier is cut
    assert aggregate.iqm([1, 2, 3, 4, 5, 6, 7, 8]) == 4.5  # 3, 4, 5, 6 remain
    assert aggregate.iqm([1, 100]) == 50.5  # too few to cut: the mean
    assert aggregate.iqm([7]) == 7.0
    with pytest.raises(ValueError, match="no values"):
        aggregate.iqm([])


def test_bootstrap_interval_known_answers():
    assert aggregate.bootstrap_interval([3.0, 3.0, 3.0]) == (3.0, 3.0)  # no spread, no width
    assert aggregate.bootstrap_interval([2.0]) == (2.0, 2.0)
    # Means of two draws of {0, 1}: 0, 0.5, 1 with chance 1/4, 1/2, 1/4, so the 2.5% and
    # 97.5% quantiles of 10,000 resamples are the extremes.
    assert aggregate.bootstrap_interval([0.0, 1.0]) == (0.0, 1.0)
    # Many values: the percentile interval of the mean approaches mean +- 1.96 sd / sqrt(n).
    x = np.arange(100.0)
    low, high = aggregate.bootstrap_interval(x)
    half = 1.96 * x.std() / np.sqrt(len(x))
    assert abs(low - (x.mean() - half)) < 0.5 and abs(high - (x.mean() + half)) < 0.5
    low, high = aggregate.bootstrap_interval(x, "iqm")
    assert low < aggregate.iqm(x) < high


def test_bootstrap_is_reproducible_and_its_seed_matters():
    x = [1.0, 5.0, 2.0, 8.0, 3.0]
    assert aggregate.bootstrap_interval(x) == aggregate.bootstrap_interval(x)
    assert aggregate.summarize(x) == aggregate.summarize(x)
    assert aggregate.bootstrap_interval(x, seed=1) != aggregate.bootstrap_interval(x, seed=0)


def test_summary_of_seeds():
    s = aggregate.summarize([4.0, 1.0, 3.0, 2.0])
    assert (s.n, s.mean, s.iqm, s.min, s.max) == (4, 2.5, 2.5, 1.0, 4.0)
    assert s.mean_low <= s.mean <= s.mean_high and s.iqm_low <= s.iqm <= s.iqm_high
    one = aggregate.summarize([7.0])
    assert (one.mean_low, one.mean_high, one.iqm_low, one.iqm_high) == (7.0, 7.0, 7.0, 7.0)


@pytest.mark.parametrize(
    "text, value",
    [
        ("253,952", 253952),
        ("1.51M", 1.51e6),
        ("741k", 741e3),
        ("99.6%", 0.996),
        ("2.51 [2.48, 2.54]", 2.51),
        ("+7.930 (100%)", 7.93),
        ("-0.05", -0.05),
        ("return +7.914", 7.914),
        ("", None),
        ("not recorded", None),
    ],
)
def test_cells_read_as_written(text, value):
    assert evidence.number(text) == pytest.approx(value) if value is not None else True
    assert (evidence.number(text) is None) == (value is None)


def test_percent_reads_the_share_in_brackets():
    assert evidence.percent("0.879 (101.8%)") == pytest.approx(1.018)
    assert evidence.percent("+7.930 (100%)") == pytest.approx(1.0)
    assert evidence.percent("98.4%") == pytest.approx(0.984)
    assert evidence.percent("0.879") is None


def test_every_selection_finds_rows_and_every_group_has_one_row_per_seed():
    found = evidence.all_groups()
    for s in evidence.SELECTIONS:
        assert s.suite in suites.BY_NAME, s
        assert any(g.study == s.study for g in found[s.suite]), f"no rows for {s}"
    for groups in found.values():
        for g in groups:
            assert len(set(g.seeds)) == len(g.seeds), g.study  # one run per seed
            assert g.protocol in evidence.PROTOCOLS and g.mode in ("single", "distributed")


def _tiny_rows(tmp_path, mode="single", seeds="0,1", extra=()):
    argv = ["--suites=dqn", f"--seeds={seeds}", "--env_steps=20000", f"--mode={mode}"]
    argv += ["--study=tiny", f"--out={tmp_path}", f"--run_root={tmp_path / 'runs'}", *extra]
    return suite_results.main(argv)


def _csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_suite_runner_writes_a_row_and_a_curve_per_seed(tmp_path):
    """Two seeds of DQN on 4x4, single process, 20k env steps (seconds each): the row
    is the last policy's, the budget the only stop, and the command reproduces it."""
    rows = _tiny_rows(tmp_path, extra=["--config.evaluator.every_env_steps=4096"])
    written = _csv(tmp_path / "at_budget.csv")
    assert [r["seed"] for r in written] == ["0", "1"] and len(rows) == 2
    curve = _csv(tmp_path / "curves" / "tiny.csv")
    for row in written:
        assert list(row) == list(suite_results.COLUMNS)
        assert row["mode"] == "single" and row["budget"] == "20000"
        assert int(row["env_steps"]) >= 20000  # ran to its budget: nothing stopped it
        assert row["target"] == "100% of the optimum" and row["final_exact"] != ""
        assert row["commit_source"] == "recorded" and re.fullmatch(r"[0-9a-f]{7}", row["commit"])
        assert "--seeds=" + row["seed"] in row["command"]
        assert "--config.evaluator.every_env_steps=4096" in row["command"]
        points = [p for p in curve if p["seed"] == row["seed"]]
        assert int(row["evaluations"]) == len(points) >= 4
        steps = [int(p["env_steps"]) for p in points]
        assert steps == sorted(steps) and steps[-1] <= int(row["env_steps"])
        best = max(float(p["mean_return"]) for p in points)
        assert float(row["best_return"]) == pytest.approx(best)
    suite = evidence.groups(suites.BY_NAME["dqn"], tmp_path)
    assert [(g.protocol, g.mode, g.seeds) for g in suite] == [(evidence.LAST, "single", (0, 1))]


@pytest.mark.slow
def test_suite_runner_reads_a_distributed_run_back(tmp_path):
    """One seed through launch/train.py (local_mp), 20k env steps: the row from its
    result.json (the last policy: keep_best off), the curve from its evaluator log."""
    _tiny_rows(tmp_path, mode="distributed", seeds="0")
    (row,) = _csv(tmp_path / "at_budget.csv")
    assert row["mode"] == "distributed" and int(row["env_steps"]) >= 20000
    config = (tmp_path / "runs" / "tiny" / "dqn" / "seed0" / "config.json").read_text()
    assert '"keep_best": false' in config and '"target_success": 0.0' in config
    assert int(row["evaluations"]) == len(_csv(tmp_path / "curves" / "tiny.csv")) >= 1


def test_first_reached_and_targets():
    curve = [
        dict(env_steps=s, mean_return=r, exact_ratio=np.nan) for s, r in [(1, 5), (2, 9), (3, 8)]
    ]
    assert suite_results.first_reached(curve, ("mean_return", 8)) == 2
    assert suite_results.first_reached(curve, ("mean_return", 10)) is None
    assert suite_results.first_reached(curve, ("exact_ratio", 0.98)) is None  # NaN never counts
    assert suite_results.first_reached(curve, None) is None
    assert suite_results.describe_target(("exact_ratio", 0.98)) == "98% of the optimum"
    assert suite_results.describe_target(("mean_return", 475.0)) == "return 475"


def test_append_refuses_other_columns(tmp_path):
    path = str(tmp_path / "x.csv")
    suite_results.append_csv(path, ("a", "b"), [dict(a=1, b=2)])
    suite_results.append_csv(path, ("a", "b"), [dict(a=3, b=4)])
    assert _csv(path) == [dict(a="1", b="2"), dict(a="3", b="4")]
    with pytest.raises(SystemExit, match="columns"):
        suite_results.append_csv(path, ("a", "c"), [dict(a=1, c=2)])


def test_fill_replaces_only_marked_regions_and_names_unknown_ones():
    text = "a\n<!-- results:x -->\nold\n<!-- /results:x -->\nb\n"
    assert results_tables.fill(text, {"x": "new"}, "doc") == (
        "a\n<!-- results:x -->\nnew\n<!-- /results:x -->\nb\n"
    )
    with pytest.raises(KeyError, match="doc: no table named 'x'"):
        results_tables.fill(text, {"y": "new"}, "doc")


def _copy_docs(tmp_path) -> pathlib.Path:
    root = tmp_path / "repo"
    for doc in (*results_tables.DOCS, results_tables.PAGE):
        (root / doc).parent.mkdir(parents=True, exist_ok=True)
        (root / doc).write_text((results_tables.ROOT / doc).read_text())
    return root


def test_stale_names_the_table_that_differs(tmp_path):
    root = _copy_docs(tmp_path)
    assert results_tables.stale(root) == []
    readme = root / "README.md"
    row = "| `ppo_spaceinvaders` |"
    readme.write_text(readme.read_text().replace(row, row + " 99 |"))
    assert results_tables.stale(root) == ["README.md: suites"]


def test_rows_fill_the_tables_and_the_page_draws_their_curves(tmp_path):
    """Rows of the runner (here two seeds at 20k env steps) appear in README's table,
    learning.md's and docs/results.md with a curve, and the image is drawn."""
    results = tmp_path / "results"
    _tiny_rows(results)
    found = evidence.all_groups(results)
    readme = results_tables.suites_table(found)
    (line,) = [ln for ln in readme.splitlines() if ln.startswith("| `dqn` |")]
    assert "| 2, single (under 5) | last policy |" in line and "not measured" not in line
    assert "`dqn`" in results_tables.tables(found)["at-budget"]
    page = results_page.page(found, results)
    (group,) = found["dqn"]
    assert f"]({results_page.image_name(group)})" in page
    assert "`dqn` (4x4" not in page.split("## `dqn`")[0]  # no longer under "not measured"
    (path,) = results_page.draw_curves(found, results, tmp_path / "docs")
    assert path.exists() and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("distributed_seeds,first", [(1, "single"), (5, "distributed")])
def test_a_suites_figure_comes_from_five_seeds_before_fewer(tmp_path, distributed_seeds, first):
    """README's row of a suite is its first group: five seeds in one process come before
    one distributed seed, and five distributed seeds before five in one process."""
    rows = _csv(evidence.RESULTS / "at_budget.csv")
    five = [r for r in rows if r["suite"] == "dqn" and r["study"] == "gridworld-4x4-single"]
    assert [r["seed"] for r in five] == ["51", "52", "53", "54", "55"]
    distributed = [dict(r, mode="distributed") for r in five[:distributed_seeds]]
    with open(tmp_path / "at_budget.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(five + distributed)
    found = evidence.groups(suites.BY_NAME["dqn"], tmp_path)
    assert [g.mode for g in found][0] == first and len(found) == 2
    table = results_tables.suites_table({s.name: [] for s in suites.SUITES} | {"dqn": found})
    (line,) = [ln for ln in table.splitlines() if ln.startswith("| `dqn` |")]
    assert f"| 5, {first} |" in line


def test_a_suite_without_rows_says_how_to_measure_it():
    found = {suite.name: [] for suite in suites.SUITES}
    page = results_page.page(found)
    for suite in suites.SUITES:
        assert results_page.command(suite) in page
    assert results_tables.suites_table(found).count("not measured") == len(suites.SUITES)


def test_the_page_names_each_suite_without_a_last_policy_on_five_seeds():
    """A non-tabular suite whose groups hold no last policy at a budget on 5 seeds is
    listed with its command; five seeds of one take it off; a tabular suite never is."""
    (five,) = [g for g in evidence.all_groups()["ppo_mujoco"] if g.study == "mujoco-ppo-1m"]
    assert five.protocol == evidence.LAST and len(five.seeds) == 5
    three = five._replace(seeds=five.seeds[:3], values=five.values[:3], rows=five.rows[:3])
    first = five._replace(protocol=evidence.FIRST)
    for groups, listed in (([five], False), ([three], True), ([first], True)):
        found = {s.name: [] for s in suites.SUITES} | {"ppo_mujoco": groups, "dqn": [first]}
        section = results_page.page(found).split("## Not measured yet")[1].split("\n## ")[0]
        short = section.split("Suites with no last policy")[1]
        assert (results_page.command(suites.BY_NAME["ppo_mujoco"]) in short) == listed
        assert "`dqn`" not in section  # an exact suite: judged against the optimum instead


def test_the_accelerator_table_takes_each_figures_newest_row_beside_its_hosts_cpu(tmp_path):
    columns = "commit,platform,device,preset,figure,batch,updates_per_call,updates_per_s"
    rows = [
        "aaa,tpu,TPU v5 lite,dqn,resident,[256],1,100",  # replaced by bbb's
        "aaa,tpu,TPU v5 lite,dqn,fed,[256],1,700",  # replaced by bbb's
        "aaa,tpu,TPU v5 lite,sac,resident,[256],1,1270",  # a case bbb's pass left out
        "aaa,cpu,cpu,dqn,resident,[256],1,2154",  # the chip host's CPU (aaa ran the chip)
        "ccc,cpu,cpu,dqn,resident,[256],32,9999",  # another machine's CPU: no chip rows
        "bbb,tpu,TPU v5 lite,dqn,resident,[256],1,2018",
        "bbb,tpu,TPU v5 lite,dqn,fed,[256],1,773",
        "bbb,tpu,TPU v5 lite,dqn,resident,[256],32,60587",
        "bbb,tpu,TPU v5 lite,dqn,fed,[256],32,14324",
        'bbb,tpu,TPU v5 lite,ppo,resident,"[16, 128]",1,1600',
        "bbb,tpu,TPU v5 lite,dqn_td[4096],td_gather,[4096],1,27",
    ]
    (tmp_path / "learner_devices.csv").write_text("\n".join([columns, *rows]) + "\n")
    lines = results_tables.accelerator_table(tmp_path).splitlines()
    assert lines[0].startswith("| preset | batch | at | TPU v5 lite, K=1 | K=1, fed | K=32 |")
    assert lines[2:] == [
        "| `dqn` | [256] | bbb | 2,018 | 773 | 60,587 | 14,324 | 2,154 | — |",
        "| `sac` | [256] | aaa | 1,270 | — | — | — | — | — |",
        "| `ppo` | [16, 128] | bbb | 1,600 | — | — | — | — | — |",
    ]


def test_a_suite_is_short_of_its_published_figure_only_when_its_interval_lies_below():
    from benchmarks.results_format import short_of

    assert short_of([-561.0, -1130.0, -162.0, -151.0, -178.0], "-152 at 20k", False)
    assert not short_of([-147.0, -148.0, -144.0, -149.0, -147.0], "-157 at 20k", False)
    assert not short_of([5.0, 40.0], "about 10 at 5M frames", False)  # no figure to hold to
    assert not short_of([1.0, 1.0, 1.0, 1.0, 0.0], "the optimum", True)  # 100% in reach
    assert short_of([0.5, 0.6, 0.55], "the optimum", True)
    assert not short_of([100.0], "1,443", False)  # one seed: no interval


def test_the_parity_section_gives_each_seed_and_the_mean_over_seeds(tmp_path):
    from benchmarks import results_page

    assert results_page.parity_section(tmp_path) == ""  # no rows: no section
    columns = "study,commit,command,platform,device,config,program,seed,env_steps,"
    columns += "mean_return,return_low,return_high,episodes"
    command = "python -m benchmarks.parity --config=configs/ppo_breakout.py --seeds=1"
    rows = [
        f"s,abc,{command},cpu,cpu,ppo_breakout,{program},{seed},2007040,{r},{r - 1},{r + 1},1000"
        for seed, (ours, theirs) in ((1, (20.0, 14.0)), (2, (16.0, 16.0)))
        for program, r in (("distrl.local", ours), ("fused", theirs))
    ]
    (tmp_path / "parity.csv").write_text("\n".join([columns, *rows]) + "\n")
    text = results_page.parity_section(tmp_path)
    assert "### `ppo_breakout` at 2.01M env steps (`s`, abc, cpu)" in text
    assert "`python -m benchmarks.parity --config=configs/ppo_breakout.py`" in text
    assert "| 1 | 20.0 [19.0, 21.0] | 14.0 [13.0, 15.0] |" in text
    assert "| across seeds | 18.0 [16.0, 20.0] | 15.0 [14.0, 16.0] |" in text
