"""Gridworld maps: the very first stage of the data flow, before any JAX.

Everything here is plain Python on strings. A map is a tuple of equal-length row
strings over the letters S (start), F (frozen, walkable), H (hole) and G (goal),
exactly as in Gymnasium's FrozenLake. This module names the standard maps, draws
seeded random maps, parses map specs such as ``"random:8x8:seed=3"`` and checks
that a map is well formed and solvable. `gridworld.py` turns a validated map into
JAX constants.
"""

from __future__ import annotations

import collections
import re
from collections.abc import Sequence

import numpy as np

Map = tuple[str, ...]

LETTERS = "SFHG"

MAPS: dict[str, Map] = {
    "4x4": ("SFFF", "FHFH", "FFFH", "HFFG"),
    # Gymnasium FrozenLake-v1 map_name="8x8".
    "8x8": (
        "SFFFFFFF",
        "FFFFFFFF",
        "FFFHFFFF",
        "FFFFFHFF",
        "FFFHFFFF",
        "FHHFFFHF",
        "FHFFHFHF",
        "FFFHFFFG",
    ),
}

# Rejection sampling draws again until a map is solvable; with p_frozen near 0 it
# might never be, so give up with an error instead of looping forever.
_MAX_RANDOM_MAP_ATTEMPTS = 10_000

_SIZE_RE = re.compile(r"^(\d+)x(\d+)$")


def bfs_distances(desc: Sequence[str]) -> np.ndarray:
    """Shortest step counts from S to every cell, moving through the 4 neighbours.

    Holes and goals end an episode, so they can be reached but not walked through.

    Args:
      desc: map rows (need not be validated beyond being rectangular).

    Returns:
      int32 array [rows, cols]: steps from S, or -1 where the cell is unreachable
      (all -1 if there is no S).
    """
    rows, cols = len(desc), len(desc[0])
    dist = np.full((rows, cols), -1, dtype=np.int32)
    starts = [(r, c) for r in range(rows) for c in range(cols) if desc[r][c] == "S"]
    if not starts:
        return dist
    dist[starts[0]] = 0
    queue = collections.deque([starts[0]])
    while queue:
        r, c = queue.popleft()
        if desc[r][c] in "HG":  # Terminal cells: the walk stops there.
            continue
        for dr, dc in ((0, -1), (1, 0), (0, 1), (-1, 0)):
            nr, nc = r + dr, c + dc
            if 0 <= nr < rows and 0 <= nc < cols and dist[nr, nc] < 0:
                dist[nr, nc] = dist[r, c] + 1
                queue.append((nr, nc))
    return dist


def has_path(desc: Sequence[str]) -> bool:
    """True if some G can be reached from S without stepping on a hole."""
    dist = bfs_distances(desc)
    return any(
        desc[r][c] == "G" and dist[r, c] >= 0 for r in range(len(desc)) for c in range(len(desc[0]))
    )


def shortest_path_length(desc: Sequence[str]) -> int:
    """Fewest steps from S to a G on a deterministic (non-slippery) map; -1 if none."""
    dist = bfs_distances(desc)
    goals = [
        int(dist[r, c])
        for r in range(len(desc))
        for c in range(len(desc[0]))
        if desc[r][c] == "G" and dist[r, c] >= 0
    ]
    return min(goals) if goals else -1


def validate_map(desc: Sequence[str]) -> Map:
    """Checks a map and returns it as a tuple of row strings.

    Raises:
      ValueError: naming the problem: not a sequence of strings, empty map, ragged
        rows, unknown letters, not exactly one S, no G, or no path from S to G.
    """
    if isinstance(desc, str) or not all(isinstance(row, str) for row in desc):
        raise ValueError(f"map must be a sequence of row strings, got {desc!r}")
    desc = tuple(desc)
    if not desc or not desc[0]:
        raise ValueError(f"empty map: {desc!r}")
    lengths = sorted({len(row) for row in desc})
    if len(lengths) > 1:
        raise ValueError(f"ragged rows: row lengths {lengths} in map {desc!r}")
    unknown = sorted(set("".join(desc)) - set(LETTERS))
    if unknown:
        raise ValueError(f"unknown letters {unknown} in map {desc!r}; allowed: S, F, H, G")
    num_starts = "".join(desc).count("S")
    if num_starts != 1:
        raise ValueError(f"map needs exactly one S (start), found {num_starts}: {desc!r}")
    if "G" not in "".join(desc):
        raise ValueError(f"map has no G (goal): {desc!r}")
    if not has_path(desc):
        raise ValueError(f"no path from S to G avoiding holes in map {desc!r}")
    return desc


def random_map(size: int | tuple[int, int], seed: int, p_frozen: float = 0.8) -> Map:
    """Draws a solvable random map, like Gymnasium's `generate_random_map`.

    Each cell is F with probability `p_frozen`, else H; S is the top-left cell and
    G the bottom-right. Maps without a path from S to G (checked by BFS) are
    rejected and redrawn, so the result is always solvable and, for a given
    (size, seed, p_frozen), always the same.

    Args:
      size: side length for a square map, or (rows, cols).
      seed: integer seed of the numpy generator.
      p_frozen: probability in (0, 1] that a cell is frozen.

    Returns:
      tuple of `rows` strings of length `cols`.
    """
    rows, cols = (size, size) if np.isscalar(size) else tuple(size)
    if int(rows) != rows or int(cols) != cols or rows < 1 or cols < 1 or rows * cols < 2:
        raise ValueError(f"random map size must hold at least 2 cells, got {size!r}")
    if not 0.0 < p_frozen <= 1.0:
        raise ValueError(f"p_frozen must be in (0, 1], got {p_frozen!r}")
    rng = np.random.default_rng(seed)
    for _ in range(_MAX_RANDOM_MAP_ATTEMPTS):
        board = rng.choice(np.array(["F", "H"]), (int(rows), int(cols)), p=[p_frozen, 1 - p_frozen])
        board[0, 0], board[-1, -1] = "S", "G"
        desc = tuple("".join(row) for row in board)
        if has_path(desc):
            return desc
    raise ValueError(
        f"no solvable {rows}x{cols} map after {_MAX_RANDOM_MAP_ATTEMPTS} draws "
        f"with p_frozen={p_frozen}; raise p_frozen"
    )


def _parse_random_spec(spec: str) -> Map:
    """Parses 'random:<rows>x<cols>:seed=<int>[:p=<float>]' into a map."""
    parts = spec.split(":")
    size = _SIZE_RE.match(parts[1]) if len(parts) > 1 else None
    if size is None:
        raise ValueError(
            f"bad random map spec {spec!r}: expected 'random:<rows>x<cols>:seed=<int>'"
        )
    options: dict[str, str] = {}
    for part in parts[2:]:
        name, sep, value = part.partition("=")
        if not sep or name not in ("seed", "p") or name in options:
            raise ValueError(f"bad random map spec {spec!r}: unknown or repeated option {part!r}")
        options[name] = value
    if "seed" not in options:
        raise ValueError(f"bad random map spec {spec!r}: missing seed=<int>")
    try:
        seed = int(options["seed"])
        p_frozen = float(options.get("p", 0.8))
    except ValueError:
        raise ValueError(f"bad random map spec {spec!r}: seed must be int, p float") from None
    return random_map((int(size.group(1)), int(size.group(2))), seed, p_frozen)


def parse_map(spec: str | Sequence[str]) -> Map:
    """Resolves a map spec to a validated map.

    Args:
      spec: a name in `MAPS` ("4x4", "8x8"), a random spec
        "random:<rows>x<cols>:seed=<int>[:p=<p_frozen>]", or a sequence of row strings.

    Returns:
      tuple of row strings.
    """
    if isinstance(spec, str):
        if spec in MAPS:
            return MAPS[spec]
        if spec.startswith("random:"):
            return _parse_random_spec(spec)
        raise ValueError(
            f"unknown map name {spec!r}; valid names: {sorted(MAPS)}, "
            "or 'random:<rows>x<cols>:seed=<int>[:p=<float>]', or a sequence of rows"
        )
    return validate_map(spec)
