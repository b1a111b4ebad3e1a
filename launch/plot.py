"""Draw a run's plots from its directory: python launch/plot.py <run dir> [<run dir> ...]

Writes <run dir>/plots/curves.png (greedy success rate and return against env
steps and wall time, from logs/evaluator.csv) and <run dir>/plots/policy.png
(value heat map with greedy-action arrows, from result.json); works on finished,
stopped and killed runs (a killed run has curves but no result, so no policy).
"""

import os
import sys

from absl import app

from distrl.analysis import plots


def main(argv):
    if len(argv) < 2:
        raise app.UsageError("usage: launch/plot.py <run dir> [<run dir> ...]")
    status = 0
    for run_dir in argv[1:]:
        paths = plots.plot_run(run_dir) if os.path.isdir(run_dir) else []
        if not paths:
            print(
                f"plot: nothing to plot in {run_dir} (no logs/evaluator.csv rows)", file=sys.stderr
            )
            status = 2
        for path in paths:
            print(path)
    return status


if __name__ == "__main__":
    app.run(main)
