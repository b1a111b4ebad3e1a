"""Stage 4 of the data flow: the pipelines, one module each, behind one protocol.

An agent config names the kind of data it learns from (`agents.PipelineKind`, its
`pipeline` property); `of(...)` gives the object that every stage asks instead of
branching on that kind (`base.Pipeline`): config fields and validation, the Reverb
item and table, the actor's items, the learner's reads and batch, the memory
estimate and the single-process trainer's data step.
- `transitions.Transitions` (REPLAY): n-step transitions [k, B] in a replay table.
- `chunks.Chunks` (CHUNKS): rollout chunks [T, B] through a queue.
- `episodes.Episodes` (EPISODES): whole-episode windows [W x T, B] through a queue.
Adding a pipeline is a module here, its kind in `agents.PipelineKind`, and a line
in `ALL`.
"""

from distrl.pipelines.base import Pipeline
from distrl.pipelines.chunks import Chunks
from distrl.pipelines.episodes import Episodes
from distrl.pipelines.transitions import Transitions

ALL: tuple[Pipeline, ...] = (Transitions(), Chunks(), Episodes())
_BY_KIND = {p.kind: p for p in ALL}


def of(agent_config) -> Pipeline:
    """The pipeline of an agent config (its `pipeline` kind)."""
    return _BY_KIND[agent_config.pipeline]


def fields() -> dict:
    """{section: {field: default}} of every pipeline's own fields (for the base config:
    every experiment config has them all, so that configs of any algorithm share one
    schema)."""
    merged = {}
    for pipeline in ALL:
        for section, values in pipeline.FIELDS.items():
            merged.setdefault(section, {}).update(values)
    return merged


__all__ = ["ALL", "Chunks", "Episodes", "Pipeline", "Transitions", "fields", "of"]
