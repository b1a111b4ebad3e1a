"""Where the suite's CPU goes: a pytest plugin (loaded by conftest.py), on with
`--cpu-profile=PATH` (`make test ARGS=--cpu-profile=/tmp/cpu.csv`).

On this 2-core machine the suite is bound by its CPU seconds, not by how its tests wait:
its wall time is at least the CPU seconds over 2. Each test's row (appended to PATH by
whichever xdist worker ran it) gives its wall time, the CPU seconds of the worker itself
(in-process programs, compiles) and of the child processes it started and waited for
(launchers and their nodes; a child is counted when reaped, so a long-lived helper such
as the warm interpreter lands on the test that reaped it). At the end the controller
prints the files that used the most.
"""

import collections
import csv
import os
import resource
import time

import pytest

COLUMNS = ("test", "wall_s", "cpu_self_s", "cpu_children_s")
_SHOWN = 15  # files in the summary


def add_option(parser) -> None:
    parser.addoption(
        "--cpu-profile",
        default="",
        metavar="PATH",
        help="append each test's wall and CPU seconds to this CSV; print the top files",
    )


def _cpu(who) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


class CpuProfile:
    def __init__(self, path: str):
        self.path = path

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        began = time.time(), _cpu(resource.RUSAGE_SELF), _cpu(resource.RUSAGE_CHILDREN)
        yield
        row = (
            item.nodeid,
            time.time() - began[0],
            _cpu(resource.RUSAGE_SELF) - began[1],
            _cpu(resource.RUSAGE_CHILDREN) - began[2],
        )
        new = not os.path.exists(self.path)
        with open(self.path, "a", newline="") as f:  # one short line: one append
            writer = csv.writer(f)
            if new:
                writer.writerow(COLUMNS)
            writer.writerow([row[0], *(f"{x:.2f}" for x in row[1:])])

    def pytest_terminal_summary(self, terminalreporter, config):
        if hasattr(config, "workerinput") or not os.path.exists(self.path):
            return
        files = collections.defaultdict(lambda: [0.0, 0.0])
        with open(self.path, newline="") as f:
            for row in csv.DictReader(f):
                if row["test"] == "test":  # a header another worker wrote at once
                    continue
                totals = files[row["test"].split("::")[0]]
                totals[0] += float(row["cpu_self_s"]) + float(row["cpu_children_s"])
                totals[1] += float(row["wall_s"])
        report = terminalreporter
        report.section(f"CPU seconds by file ({self.path})")
        for name, (cpu, wall) in sorted(files.items(), key=lambda f: -f[1][0])[:_SHOWN]:
            report.write_line(f"{cpu:8.1f} CPU s {wall:8.1f} s  {name}")
        report.write_line(f"{sum(c for c, _ in files.values()):8.1f} CPU s in all")


def install(config) -> None:
    path = config.getoption("--cpu-profile")
    if path:
        config.pluginmanager.register(CpuProfile(os.path.abspath(path)), "distrl-cpu-profile")
