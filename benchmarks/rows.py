"""The rows of the benchmark table, declared as data, and the one function that computes them.

A row names where its figure sits in `run.py`'s results (a dotted path such as
'stages.dqn.actor.env_steps_per_s'), its unit, where its ceilings sit (the lowest
one measured counts), its goal (issue 14's table: '>= 0.8x' on the ratio, '<= 10 s'
on the figure) and a note template ('{path}' or '{path:unit}' are filled in from the
results). '<algo>' and '<role>' in any field are expanded by `_each`. Every ratio
divides two figures of the same run. Sections that did not run (or failed) give
rows with no figure and the error as the note, so the table keeps its shape.
"""

import dataclasses
import re

from benchmarks.report import Row, fmt

ALGOS = ("dqn", "ppo")
ROLES = ("replay", "counter", "learner", "actor", "evaluator")  # node groups of make_program
E2E_ACTORS = 2  # the end-to-end program's actors (issue 14's rows)


@dataclasses.dataclass(frozen=True)
class Spec:
    """One declared row (see the module docstring). `only_if`: a path that must hold
    a true value for the figure to count (a time to solve counts once it solved)."""

    section: str
    label: str
    figure: str
    unit: str
    ceiling: tuple = ()
    ceiling_name: str = ""
    goal: str = ""
    note: str = ""
    only_if: str = ""


def _each(spec: Spec, **values) -> list:
    """`spec` once per value of each placeholder: _each(s, algo=ALGOS) -> [dqn row, ppo row]."""
    specs = [spec]
    for name, options in values.items():
        specs = [_fill(s, f"<{name}>", value) for s in specs for value in options]
    return specs


def _fill(spec: Spec, placeholder: str, value: str) -> Spec:
    def sub(x):
        if isinstance(x, tuple):
            return tuple(sub(y) for y in x)
        return x.replace(placeholder, value) if isinstance(x, str) else x

    return Spec(**{k: sub(v) for k, v in dataclasses.asdict(spec).items()})


_C = "ceilings.<algo>"
_E = "e2e.<algo>"
_E2E_NOTE = (
    "{e2e.<algo>.updates_per_s} upd/s, {e2e.<algo>.samples_per_s} samples/s, "
    "SPI {e2e.<algo>.samples_per_insert}, lag {e2e.<algo>.mean_version_lag}, "
    "learner waits {e2e.<algo>.wait_share:share}, "
    "actors blocked {e2e.<algo>.actor_blocked_share:share}"
)

ROWS = [
    # 1. Each stage's work alone, in the bench process.
    *_each(Spec("1 ceilings", "<algo> rollout {ceilings.<algo>.rollout.shape} (no I/O)",
                f"{_C}.rollout.steps_per_s", "env steps/s"), algo=ALGOS),
    *_each(Spec("1 ceilings", "<algo> actor compute (rollout + items + device_get)",
                f"{_C}.actor_compute.steps_per_s", "env steps/s",
                (f"{_C}.rollout.steps_per_s",), "rollout", ">= 0.8x"), algo=ALGOS),
    *_each(Spec("1 ceilings", "<algo> update {ceilings.<algo>.update.batch} (device batches)",
                f"{_C}.update.updates_per_s", "updates/s",
                note=f"{{{_C}.update.samples_per_s}} samples/s"), algo=ALGOS),
    *_each(Spec("1 ceilings", "<algo> Reverb insert (replay.Writer, server in a child process)",
                f"{_C}.reverb.insert_steps_per_s", "transitions/s",
                note=f"{{{_C}.reverb.insert_items_per_s}} items/s"), algo=ALGOS),
    *_each(Spec("1 ceilings", "<algo> Reverb read (replay.make_dataset + to_learner_batch)",
                f"{_C}.reverb.read_samples_per_s", "samples/s",
                note=f"{{{_C}.reverb.read_batches_per_s}} batches/s"), algo=ALGOS),
    # 2. The real Actor alone and the real Learner alone, under local_mp.
    *_each(Spec("2 stages", "<algo> 1 actor alone: env steps/s",
                "stages.<algo>.actor.env_steps_per_s", "env steps/s",
                (f"{_C}.rollout.steps_per_s",), "rollout", ">= 0.5x",
                "blocked on Reverb {stages.<algo>.actor.blocked_share:share}, "
                "{stages.<algo>.actor.items_per_s} items/s, "
                "{stages.<algo>.actor.transitions_to_reverb_per_s} transitions/s into Reverb "
                f"(insert ceiling {{{_C}.reverb.insert_steps_per_s}})"), algo=ALGOS),
    *[Spec("2 stages", f"{algo} learner alone (pre-filled table): updates/s",
           f"stages.{algo}.learner.updates_per_s", "updates/s",
           (f"ceilings.{algo}.update.updates_per_s",), "update", goal,
           f"waits for data {{stages.{algo}.learner.wait_share:share}}, "
           f"{{stages.{algo}.learner.samples_per_s}} samples/s")
      for algo, goal in (("dqn", ">= 0.7x"), ("ppo", ""))],
    # 3. distrl's own program (make_program), 2 actors, under local_mp.
    Spec("3 end to end", f"dqn {E2E_ACTORS} actors, SPI 1: env steps/s",
         "e2e.dqn.env_steps_per_s", "env steps/s",
         ("ceilings.dqn.rollout.steps_per_s", "ceilings.dqn.update.samples_per_s"),
         "min(rollout, update samples/s)", ">= 0.5x", _E2E_NOTE.replace("<algo>", "dqn")),
    Spec("3 end to end", f"ppo {E2E_ACTORS} actors: learner updates/s",
         "e2e.ppo.updates_per_s", "updates/s", ("ceilings.ppo.update.updates_per_s",),
         "update", ">= 0.85x",
         "{e2e.ppo.env_steps_per_s} env steps/s; " + _E2E_NOTE.replace("<algo>", "ppo")),
    # 4. Start-up and memory of the same end-to-end program.
    *_each(Spec("4 start-up", "<algo>: command to the first actor insert",
                f"{_E}.startup.first_insert", "s",
                note=f"first env steps counted at {{{_E}.startup.first_env_steps:s}}"), algo=ALGOS),
    *_each(Spec("4 start-up", "<algo>: command to the first learner update",
                f"{_E}.startup.first_update", "s",
                note=f"first sample at {{{_E}.startup.first_sample:s}}"), algo=ALGOS),
    *_each(Spec("4 start-up", f"<algo>: command to every node stepping ({E2E_ACTORS} actors)",
                f"{_E}.startup.every_node", "s",
                note=f"last actor's first rollout {{{_E}.startup.actors:s}}, "
                f"first evaluation {{{_E}.startup.first_eval:s}}"), algo=ALGOS),
    *_each(Spec("4 memory", "<algo> <role> process: peak RSS", f"{_E}.memory.<role>.hwm_gb", "GB",
                note=f"at the window's end: RSS {{{_E}.memory.<role>.rss_gb}}, "
                f"PSS {{{_E}.memory.<role>.pss_gb}}, USS {{{_E}.memory.<role>.uss_gb}} GB"),
           algo=ALGOS, role=ROLES),
    *_each(Spec("4 memory", "<algo> all node processes: PSS at the window's end",
                f"{_E}.memory.total.pss_gb", "GB",
                note=f"RSS {{{_E}.memory.total.rss_gb}} GB over {{{_E}.memory.total.count}} "
                "processes"), algo=ALGOS),
    # 5. Time to solve: launch/train.py from its command to its exit.
    *_each(Spec("5 time to solve", "<algo> 4x4, 2 actors, local_mp: start to exit",
                "solve.<algo>.wall", "s", goal="<= 10 s", note="{solve.<algo>.summary}",
                only_if="solve.<algo>.reached"), algo=ALGOS),
    *_each(Spec("5 time to solve", "<algo> 4x4, 2 actors: command to first evaluation",
                "solve.<algo>.up_at", "s", goal="<= 5 s"), algo=ALGOS),
    *_each(Spec("5 time to solve",
                "<algo> 8x8 slippery, 2 actors: to 95% of optimal ({slippery.optimal.target})",
                "slippery.<algo>.wall", "s", note="{slippery.<algo>.summary}",
                only_if="slippery.<algo>.reached"), algo=ALGOS),
]


def get(tree, path: str):
    """tree['a']['b'] for 'a.b', or None where any level is missing."""
    for key in path.split("."):
        if not isinstance(tree, dict) or tree.get(key) is None:
            return None
        tree = tree[key]
    return tree


_FIELD = re.compile(r"\{([^{}:]+)(?::(\w+))?\}")


def render(template: str, results) -> str:
    """'{a.b} items/s, {a.c:share}' with the results' values, formatted by `fmt`."""
    return _FIELD.sub(lambda m: fmt(get(results, m.group(1)), m.group(2) or ""), template)


def _error(results, path: str) -> str:
    """Why a figure is missing: the deepest 'error' on its path; 'not run' where the
    path stops before its last level; '' where only the figure itself is missing."""
    parts, found = path.split("."), ""
    for i in range(1, len(parts) + 1):
        node = get(results, ".".join(parts[:i]))
        if node is None:
            if (results.get("errors") or {}).get(parts[0]):
                return f"the section failed (bench.json 'errors'); {found}".rstrip("; ")
            return found or ("not run" if i < len(parts) else "")
        if isinstance(node, dict) and node.get("error"):
            found = node["error"]
    return found


def build_row(spec: Spec, results) -> Row:
    """One row: the figure, the lowest ceiling measured, the goal, the filled-in note."""
    figure = get(results, spec.figure)
    if spec.only_if and not get(results, spec.only_if):
        figure = None
    ceilings = [c for c in (get(results, p) for p in spec.ceiling) if c]
    note = render(spec.note, results)
    if figure is None:
        note = _error(results, spec.figure) or note
    return Row(spec.section, render(spec.label, results), figure, spec.unit,
               min(ceilings) if ceilings else None, spec.ceiling_name, spec.goal, note)


def build_rows(results) -> list:
    """Every row of the table, in order."""
    return [build_row(spec, results) for spec in ROWS]
