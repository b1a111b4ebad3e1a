"""Stage 4 of the data flow: the pipelines, one module each, behind one protocol.

An agent config names the kind of data it learns from (`agents.PipelineKind`, its
`pipeline` property); `of(...)` gives the object that every stage asks instead of
branching on that kind (`base.Pipeline`): config fields and validation, the Reverb
item and table, the actor's items, the learner's reads and batch, the memory
estimate and the single-process trainer's data step.
- `transitions.Transitions` (REPLAY): n-step transitions [k, B] in a replay table.
- `chunks.Chunks` (CHUNKS): rollout chunks [T, B] through a queue.
- `episodes.Episodes` (EPISODES): whole-episode windows [W x T, B] through a queue.
- `sequences.Sequences` (SEQUENCES): overlapping sequences [L] of one env with a
  recurrent core's state at their start, in a replay table (R2D2).
The actor, learner and replay sections of the experiment config are this package's:
the fields every pipeline shares (`SHARED_FIELDS`) and each pipeline's own
(`Pipeline.FIELDS`, `section_defaults`), checked together (`check_section`).
Adding a pipeline is a module here, its kind in `agents.PipelineKind`, and a line
in `ALL`.
"""

from distrl import envs
from distrl.errors import at_least, check
from distrl.pipelines.base import Pipeline
from distrl.pipelines.chunks import Chunks
from distrl.pipelines.episodes import Episodes
from distrl.pipelines.sequences import Sequences
from distrl.pipelines.transitions import Transitions

ALL: tuple[Pipeline, ...] = (Transitions(), Chunks(), Episodes(), Sequences())
_BY_KIND = {p.kind: p for p in ALL}

DEVICES = ("auto", "cpu", "gpu", "tpu")  # learner.device
# The actor's and learner's integers and non-negative numbers, every pipeline's fields'
# included (every config has them all), with their lowest value: checked before the
# agent's pipeline checks how they fit together (which divides by some of them).
LOWEST = {
    "actor.num_envs": 1,
    "actor.unroll_length": 1,
    "replay.item_steps": 1,
    "actor.params_update_period": 1,
    "actor.epsilon_spread": 0,
    "learner.prefetch": 0,
    "learner.batches_per_read": 1,
    "learner.batch_sequences": 1,
    "replay.sequence_length": 1,
    "learner.updates_in_flight": 0,
    "learner.max_in_flight": 0,
    "learner.updates_per_call": 1,
    "actor.chunks_per_version": 0,
}


# The fields every pipeline reads, with their defaults (the actor's unroll_length is
# the agent's pipeline's `unroll_length` unless the config says).
SHARED_FIELDS = {
    "actor": dict(
        num_envs=64,  # B: envs one actor steps together
        params_update_period=1,  # rollouts between parameter pulls
        epsilon_spread=0.0,  # DQN: actor i uses eps**(1 + spread*i/(N-1)) (Ape-X); >= 0
    ),
    "replay": {},
    "learner": dict(
        prefetch=4,  # batches fetched ahead of the update (0: none)
        # samples a dataset worker requests ahead; 0: the pipeline's (queue: one batch, so
        # chunks do not age there; replay: max(64 time steps of B envs, 4 batches))
        max_in_flight=0,
        # K: updates in one jitted call (a scan over K stacked batches), so a small-batch
        # update on an accelerator is not bound by its dispatch; replay tables only
        updates_per_call=1,
        # the learner process's JAX platform: "auto" (JAX's default: the host's GPU or
        # TPU where it has one, else the CPU) | "cpu" | "gpu" | "tpu"; every other node
        # runs on the CPU (distrl.program.nodeenv)
        device="auto",
    ),
}


def of(agent_config) -> Pipeline:
    """The pipeline of an agent config (its `pipeline` kind)."""
    return _BY_KIND[agent_config.pipeline]


def check_section(experiment) -> None:
    """ConfigError for an actor, learner or replay value that cannot work: out of its
    range (`LOWEST`), or not fitting the agent's pipeline (`Pipeline.validate`)."""
    config, agent_config, env = experiment.config, experiment.agent_config, experiment.env
    at_least(config, LOWEST)
    pipeline = of(agent_config)
    core = getattr(agent_config, "core", "none")
    check(
        core == "none" or pipeline.carries_core_state,
        f"config.agent.core={core!r}: the {pipeline.kind.value} pipeline of "
        f"config.algorithm={config.algorithm!r} cannot carry a recurrent state; use "
        f"core='none', or a recurrent core with ppo, a2c or vtrace (chunks) or r2d2 (sequences)",
    )
    check(
        core == "none" or not envs.is_host_env(env),
        f"config.agent.core={core!r}: an env stepped in Python ({config.env.name}) "
        f"takes feed-forward policies only; use core='none', or a JAX env",
    )
    device = config.learner.device
    check(device in DEVICES, f"config.learner.device={device!r}; valid: {', '.join(DEVICES)}")
    calls = config.learner.updates_per_call
    check(
        calls == 1 or pipeline.reading(config).consumed is False,
        f"config.learner.updates_per_call={calls}: the {pipeline.kind.value} pipeline's "
        f"batches come from a queue one round of actors at a time; need 1 (K > 1 is for "
        f"replay tables: dqn, tabular, sac, td3, r2d2)",
    )
    pipeline.validate(config, agent_config, env)


def section_defaults(agent_config) -> dict:
    """{section: {field: default}} of the actor, replay and learner sections: the shared
    fields and every pipeline's own (every config has them all, so that configs of any
    algorithm share one schema), T the agent's pipeline's."""
    merged = {section: dict(values) for section, values in SHARED_FIELDS.items()}
    merged["actor"]["unroll_length"] = of(agent_config).unroll_length  # T: steps per chunk
    for pipeline in ALL:
        for section, values in pipeline.FIELDS.items():
            merged[section].update(values)
    return merged


__all__ = [
    "ALL",
    "SHARED_FIELDS",
    "Chunks",
    "Episodes",
    "Pipeline",
    "Sequences",
    "Transitions",
    "check_section",
    "of",
    "section_defaults",
]
