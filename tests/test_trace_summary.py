"""benchmarks/trace_summary.py's reading of XProf's per-op table (XProf itself is
installed beside distrl, not here): each op's self time per update, grouped by the
source line it came from and by how often it ran per update, backward ops apart."""

import json

from benchmarks import trace_summary


def _table(ops):
    ids = ("hlo_op_name", "tf_op_name", "occurrences", "total_self_time", "source_info")
    cols = [{"id": i, "label": i, "type": "string"} for i in ids]
    return json.dumps({"cols": cols, "rows": [{"c": [{"v": v} for v in op]} for op in ops]})


def _source(path):
    return f"<div class='source-info-cell' title='{path}\nmore'>{path}</div>"


OPS = [  # 2 updates traced: a 3-step scan's forward and backward, and one per-update op
    ("dot.1", "jit(f)/while/body/gru/dot_general", 6, 12.0, _source("/x/site/haiku/r.py:583")),
    ("dot.2", "jit(f)/transpose(jvp())/while/dot", 6, 6.0, _source("/x/site/haiku/r.py:583")),
    ("add.3", "jit(f)/add", 2, 1.0, _source("/work/main/distrl/agents/r2d2.py:171")),
    ("copy.4", "jit(f)/copy", 1, 1.0, None),
]


def test_views_give_each_lines_and_each_loops_time_per_update():
    ops = trace_summary.hlo_rows(_table(OPS).encode())
    assert [trace_summary.source_line(op) for op in ops] == [
        "haiku/r.py:583", "haiku/r.py:583", "distrl/agents/r2d2.py:171", "?",
    ]  # fmt: skip
    views = trace_summary.views(ops, updates=2)
    assert views["line"] == [
        ("haiku/r.py:583", 9.0, 2), ("distrl/agents/r2d2.py:171", 0.5, 1), ("?", 0.5, 1),
    ]  # fmt: skip
    assert views["runs"] == [
        ("3 per update", 6.0, 1), ("3 per update, backward", 3.0, 1),
        ("1 per update", 0.5, 1), ("0.5 per update", 0.5, 1),
    ]  # fmt: skip
