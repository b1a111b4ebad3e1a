"""Where an update's device time goes, from a profile `accelerator.py --trace` wrote.

Reads XProf's per-op table (`hlo_stats`) of an `*.xplane.pb` and prints the device time
per update two ways: by the source line each op came from (the innermost frame, so a
network layer is named by the library line that called the matmul), and by how many
times an op ran per update (32 for a step of a 32-step scan: the sequential loops).
A small update on an accelerator is bound by its chain of small ops, so the second
view says which loop to shorten. XProf is not a dependency of distrl: install it
beside, as `benchmarks/profile.py` does py-spy:

    python3 -m venv /tmp/xprof && /tmp/xprof/bin/pip install xprof
    /tmp/xprof/bin/python -m benchmarks.trace_summary --updates=96 \
        --csv=benchmarks/results/profiles.csv --case=r2d2_memory_chain --commit=<sha> \
        r2d2.xplane.pb

`--updates`: the updates the trace holds (`_trace`'s 3 calls x K). `--csv` appends each
view's top rows with the case, the commit the trace ran on and its platform.
"""

import argparse
import collections
import datetime
import json
import re

from benchmarks.common import append_csv  # the standard library only: runs in XProf's venv

COLUMNS = ("study", "date", "commit", "commit_source", "case", "platform", "view", "key")
COLUMNS += ("us_per_update", "ops", "note")
_SOURCE = re.compile(r"'>([^<]*)</div>")


def hlo_rows(table: bytes) -> list[dict]:
    """XProf's hlo_stats table (a gviz DataTable in JSON) as one dict per op."""
    data = json.loads(table)
    ids = [c["id"] for c in data["cols"]]
    return [dict(zip(ids, [c["v"] if c else None for c in row["c"]])) for row in data["rows"]]


def source_line(op: dict) -> str:
    """The innermost frame of the op's source, from its package ("haiku/_src/basic.py:180",
    "distrl/agents/r2d2.py:124"), or "?"."""
    found = _SOURCE.search(op.get("source_info") or "")
    if not found:
        return "?"
    path = found.group(1)
    for marker in ("/site-packages/", "/dist-packages/", "/site/", "/distrl/", "/benchmarks/"):
        if marker in path:
            head = marker[1:] if marker in ("/distrl/", "/benchmarks/") else ""
            return head + path.rsplit(marker, 1)[1]
    return path


def per_update(ops: list[dict], updates: int, key) -> list[tuple]:
    """(key, µs of self time per update, distinct ops) grouped by key(op), largest first."""
    time, count = collections.Counter(), collections.Counter()
    for op in ops:
        time[key(op)] += op["total_self_time"] / updates
        count[key(op)] += 1
    return [(k, t, count[k]) for k, t in time.most_common()]


def views(ops: list[dict], updates: int) -> dict:
    """The two views: by source line, and by runs per update (backward ops apart)."""

    def runs(op):
        backward = "transpose(" in (op.get("tf_op_name") or "")
        return f"{op['occurrences'] / updates:g} per update" + (", backward" * backward)

    return {"line": per_update(ops, updates, source_line), "runs": per_update(ops, updates, runs)}


def _table(xplane: str) -> bytes:
    from xprof.convert import raw_to_tool_data  # noqa: PLC0415 (installed beside, see above)

    return raw_to_tool_data.xspace_to_tool_data([xplane], "hlo_stats", {})[0]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("xplane")
    parser.add_argument("--updates", type=int, required=True, help="updates in the trace")
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--csv", default="", help="append the by-line rows here")
    for name in ("case", "commit", "platform", "note"):
        parser.add_argument(f"--{name}", default="")
    args = parser.parse_args(argv)
    if args.updates < 1:
        parser.error(f"--updates={args.updates}: the updates the trace holds, at least 1")
    ops = hlo_rows(_table(args.xplane))
    found = views(ops, args.updates)
    total = sum(t for _, t, _ in found["line"])
    print(f"{args.xplane}: {total:.1f} µs of device time per update")
    for view, rows in found.items():
        print(f"\nby {view}:")
        for key, us, count in rows[: args.top]:
            print(f"{us:9.2f} µs {us / total:6.1%} {count:4d} ops  {key}")
    if args.csv:
        context = dict(study="device-profile", date=datetime.date.today().isoformat())
        context.update(commit=args.commit, commit_source="named", case=args.case)
        context.update(platform=args.platform, note=args.note)
        rows = [
            dict(context, view=view, key=key, us_per_update=f"{us:.2f}", ops=count)
            for view, top in found.items()
            for key, us, count in top[: args.top]
        ]
        append_csv(args.csv, COLUMNS, rows)


if __name__ == "__main__":
    main()
