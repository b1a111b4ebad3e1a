"""Stage 8, analysis: learning curves and the learned policy as PNG files.

Everything is drawn from a run directory alone (so `launch/plot.py` can redraw a
finished or killed run):
- `plots/curves.png`: greedy success rate (with its 95% interval, the exact success
  of the greedy policy and the optimum's, where logged) and mean return against
  env steps and against wall time, from `logs/evaluator.csv`; a resumed run's launches are
  drawn as separate segments with the resume points marked.
- `plots/policy.png`: the value estimate of every cell as a heat map, the greedy
  action as an arrow, holes and the goal marked, and beside it the value error per
  cell (learned minus the exact value of the policy it estimates), from `result.json`.
`plot_comparison` overlays several configs' curves with their spread across seeds
(mean line, min-max band) for `distrl.analysis.compare`.

Matplotlib's object API with the Agg canvas: no pyplot global state, no display.
"""

import json
import os
import textwrap

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from distrl import metrics
from distrl.records import rundir

PANELS = (("success_rate", "success rate"), ("mean_return", "mean return"))
X_AXES = (("env_steps", "env steps"), ("elapsed", "wall time (s)"))
_ARROW = {0: (-1, 0), 1: (0, 1), 2: (1, 0), 3: (0, -1)}  # LEFT DOWN RIGHT UP, image rows down


def plot_run(run_dir: str) -> list:
    """Draws every plot the run directory has data for; returns their paths."""
    out = os.path.join(run_dir, rundir.PLOTS_DIR)
    os.makedirs(out, exist_ok=True)
    paths = []
    data = metrics.read_csv(metrics.csv_path(run_dir, "evaluator"))
    if data and len(data["step"]):
        paths.append(plot_curves(data, _title(run_dir), os.path.join(out, "curves.png")))
    result_path = os.path.join(run_dir, rundir.RESULT_FILE)
    if os.path.exists(result_path):
        with open(result_path) as f:
            result = json.load(f)
        if result.get("values") is not None:
            paths.append(plot_policy(result, os.path.join(out, "policy.png")))
    return paths


def segments(data) -> list:
    """Index arrays of the launches in one evaluator log, split where the counts or the
    clock go back: logs of older versions, whose resumes restarted both at the
    checkpoint's (a resume continues both from the counter's record)."""
    steps = data["env_steps"]
    back = np.diff(steps) < 0
    if "elapsed" in data:
        back |= np.diff(data["elapsed"]) < 0
    return np.split(np.arange(len(steps)), np.flatnonzero(back) + 1)


def plot_curves(data, title: str, path: str) -> str:
    """2 x 2 panels: success rate and return against env steps and wall time; 1 x 2,
    the return only, for an env without a success signal (no success column)."""
    panels = tuple(p for p in PANELS if p[0] in data)
    fig = Figure(figsize=(10, 3.3 * len(panels)), layout="constrained")
    axes = np.asarray(fig.subplots(len(panels), 2)).reshape(len(panels), 2)
    parts = segments(data)
    for (y_key, y_label), row in zip(panels, axes):
        for (x_key, x_label), ax in zip(X_AXES, row):
            for i, idx in enumerate(parts):
                ax.plot(data[x_key][idx], data[y_key][idx], color="C0", lw=1.5, marker="o", ms=2)
                if y_key == "success_rate":
                    _success_extras(ax, data, x_key, idx, label=i == 0)
                if y_key == "mean_return" and "return_low" in data:
                    low, high = data["return_low"][idx], data["return_high"][idx]
                    ax.fill_between(data[x_key][idx], low, high, color="C0", alpha=0.2, lw=0)
                if i:
                    ax.axvline(data[x_key][idx[0]], color="0.5", ls=":", lw=1)
            if y_key == "success_rate" and "exact_success" in data:
                ax.legend(loc="lower right", fontsize=7)
            ax.set(xlabel=x_label, ylabel=y_label)
            ax.grid(alpha=0.3)
    fig.suptitle(title + ("\n(dotted lines: where the run was resumed)" if len(parts) > 1 else ""))
    return _save(fig, path)


def _success_extras(ax, data, x_key: str, idx, label: bool) -> None:
    """The 95% interval as a band, the exact success and the optimum's, where logged."""
    x = data[x_key][idx]
    if "success_low" in data:
        ax.fill_between(
            x,
            data["success_low"][idx],
            data["success_high"][idx],
            color="C0",
            alpha=0.2,
            lw=0,
            label="95% interval" if label else None,
        )
    if "exact_success" in data:
        ax.plot(
            x,
            data["exact_success"][idx],
            color="C2",
            lw=1.2,
            label="exact success" if label else None,
        )
        ax.plot(
            x,
            data["optimal_success"][idx],
            color="C3",
            lw=1,
            ls="--",
            label="optimal (pi*)" if label else None,
        )


# Bounds of the policy picture: a big map drawn cell by cell (an arrow per cell on a
# figure sized to the map) would take gigabytes. Above ARROW_CELLS on a side only the
# heat map is drawn; above MAX_PIXELS_SIDE cells it is subsampled; the figure is at
# most MAX_INCHES wide or high.
ARROW_CELLS = 32
MAX_PIXELS_SIDE = 512
MAX_INCHES = 14.0


def plot_policy(result, path: str) -> str:
    """The value heat map with greedy-action arrows; H and G drawn as squares. Beside it,
    where result.json has one, the value error per cell: the learned value minus the
    exact value of the policy it estimates (`exact_check.exact_answer`).

    Big maps: arrows and letters only up to ARROW_CELLS cells on a side, the heat
    map subsampled to MAX_PIXELS_SIDE; the title says what was left out.
    """
    desc = result["map"]
    values, actions = np.asarray(result["values"], float), np.asarray(result["actions"])
    answer = result.get("exact") or {}
    errors = answer.get("value_errors")
    terminal = np.array([[ch in "HG" for ch in row] for row in desc])
    rows, cols = values.shape
    stride = max(1, -(-max(rows, cols) // MAX_PIXELS_SIDE))
    panels = 2 if errors is not None else 1
    scale = min(1.2, MAX_INCHES / max(rows, panels * cols))  # both panels within MAX_INCHES
    fig = Figure(figsize=(panels * (scale * cols + 1.6), scale * rows + 1.0), layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, panels))
    ax = axes[0]
    shown = np.ma.masked_where(terminal, values)[::stride, ::stride]
    extent = (-0.5, cols - 0.5, rows - 0.5, -0.5)
    image = ax.imshow(shown, cmap="viridis", extent=extent)
    untrained = answer.get("learned_policy", "") is None  # no critic: the head is untrained
    label = "untrained value head (no critic)" if untrained else "value estimate (max Q or V)"
    fig.colorbar(image, ax=ax, label=label, shrink=0.8)
    notes = []
    arrows = max(rows, cols) <= ARROW_CELLS
    if arrows:
        for r, row in enumerate(desc):
            for c, ch in enumerate(row):
                _draw_cell(ax, r, c, ch, int(actions[r, c]))
        ax.set(xticks=range(cols), yticks=range(rows))
    else:
        notes.append(f"{rows}x{cols} map: arrows drawn up to {ARROW_CELLS}x{ARROW_CELLS}")
    if stride > 1:
        notes.append(f"every {stride}th cell shown")
    success = (result.get("evaluation") or {}).get("success_rate")
    note = f" (success {success:.3f})" if success is not None else ""
    if answer:
        note += (
            f"\nexact {answer['success']:.3f} of optimal {answer['optimal_success']:.3f}"
            f" ({100 * answer['ratio']:.1f}%); V*(S) {answer['optimal_value']:+.3f}"
        )
    ax.set_title("greedy policy and values" + note + "".join(f"\n{n}" for n in notes))
    if errors is not None:
        _error_panel(fig, axes[1], desc, np.asarray(errors, float), answer, stride, arrows)
    return _save(fig, path)


# How the error panel names the policy whose value was learned (`agents.base.ValuedPolicy`).
_VALUED = {"greedy": "greedy policy", "sampling": "sampling policy"}


def _error_panel(fig, ax, desc, errors, answer, stride: int, numbers: bool) -> None:
    """Learned minus exact value per cell on a diverging scale centred on 0 (H and G,
    None in result.json, are left blank), the numbers written in where cells are big."""
    rows, cols = errors.shape
    limit = max(np.nanmax(np.abs(errors)) if np.isfinite(errors).any() else 0.0, 0.05)
    shown = np.ma.masked_invalid(errors)[::stride, ::stride]
    image = ax.imshow(
        shown,
        cmap="RdBu_r",
        vmin=-limit,
        vmax=limit,
        extent=(-0.5, cols - 0.5, rows - 0.5, -0.5),
    )
    fig.colorbar(image, ax=ax, label="learned - exact value", shrink=0.8)
    if numbers:
        for r, row in enumerate(desc):
            for c, ch in enumerate(row):
                if ch in "HG":
                    _draw_cell(ax, r, c, ch, 0)
                else:
                    dark = abs(errors[r, c]) > 0.6 * limit
                    ax.text(
                        c,
                        r,
                        f"{np.round(errors[r, c], 2) + 0.0:+.2f}",  # noise as +0.00
                        ha="center",
                        va="center",
                        fontsize=10,
                        color="white" if dark else "black",
                    )
        ax.set(xticks=range(cols), yticks=range(rows))
    name = _VALUED.get(answer["learned_policy"], answer["learned_policy"])
    ax.set_title(
        f"value error: learned - exact V^pi ({name})\n"
        f"V(S) learned {answer['learned_value']:+.3f}, exact {answer['learned_policy_value']:+.3f}"
    )


def _draw_cell(ax, r: int, c: int, ch: str, action: int) -> None:
    if ch in "HG":
        color = "0.25" if ch == "H" else "gold"
        ax.add_patch(Rectangle((c - 0.5, r - 0.5), 1, 1, color=color))
        ax.text(
            c,
            r,
            ch,
            ha="center",
            va="center",
            fontsize=14,
            weight="bold",
            color="white" if ch == "H" else "black",
        )
        return
    dx, dy = _ARROW[action]
    ax.arrow(
        c - 0.28 * dx,
        r - 0.28 * dy,
        0.56 * dx,
        0.56 * dy,
        width=0.04,
        head_width=0.2,
        length_includes_head=True,
        color="white",
        ec="black",
        lw=0.5,
    )
    if ch == "S":
        ax.text(c - 0.42, r - 0.42, "S", ha="left", va="top", fontsize=9, color="white")


def band(runs, num: int = 200):
    """(x grid, mean, min, max) of several seeds' (x, y) curves, up to the shortest x."""
    end = min(x[-1] for x, _ in runs)
    grid = np.linspace(min(x[0] for x, _ in runs), end, num)
    ys = np.stack([np.interp(grid, x, y) for x, y in runs])
    return grid, ys.mean(0), ys.min(0), ys.max(0)


def plot_comparison(curves, x_axes, title: str, path: str, target=None, panels=PANELS) -> str:
    """Overlaid curves of several labels with their spread across seeds.

    curves: {label: [columns dict per seed]}; x_axes: ((column, axis label), ...).
    One row per panel of `panels` ((column, axis label), ...), one column per x axis;
    mean line, min-max band. target: {column: [y of a dashed line]} or one success
    rate (a line on "success_rate").
    """
    lines = target if isinstance(target, dict) else {"success_rate": [target] if target else []}
    fig = Figure(figsize=(5 * len(x_axes), 3.5 * len(panels)), layout="constrained")
    axes = np.asarray(fig.subplots(len(panels), len(x_axes))).reshape(len(panels), -1)
    for i, (label, runs) in enumerate(curves.items()):
        for (y_key, y_label), row in zip(panels, axes):
            for (x_key, x_label), ax in zip(x_axes, row):
                grid, mean, lo, hi = band([(run[x_key], run[y_key]) for run in runs])
                ax.plot(grid, mean, color=f"C{i}", lw=1.8, label=f"{label} (n={len(runs)})")
                ax.fill_between(grid, lo, hi, color=f"C{i}", alpha=0.2, lw=0)
                ax.set(xlabel=x_label, ylabel=y_label)
                ax.grid(alpha=0.3)
                for y in lines.get(y_key, []):
                    ax.axhline(y, color="0.4", ls="--", lw=0.8)
    axes[0, 0].legend(loc="lower right", fontsize=8)
    fig.suptitle(textwrap.fill(title, 9 * 5 * len(x_axes), break_on_hyphens=False))
    return _save(fig, path)


def _title(run_dir: str) -> str:
    path = os.path.join(run_dir, rundir.CONFIG_FILE)
    if not os.path.exists(path):
        return os.path.basename(run_dir)
    with open(path) as f:
        c = json.load(f)
    name = c["env"].get("name", "gridworld")  # configs saved before env.name: gridworld
    env = c["env"]["map"] if name == "gridworld" else name
    return (
        f"{c['algorithm']} on {env}, {c['num_actors']} actors, seed {c['seed']}"
        f" (greedy evaluation, {c['evaluator']['num_envs']} episodes)"
    )


def _save(fig: Figure, path: str) -> str:
    FigureCanvasAgg(fig)
    tmp = path + ".tmp.png"
    fig.savefig(tmp, dpi=110)
    os.replace(tmp, path)
    return path
