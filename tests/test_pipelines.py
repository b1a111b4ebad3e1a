"""The pipelines as objects: every stage asks one, none branches on the kind.

The items themselves travel through a real Reverb server in tests/test_replay.py
(`test_actor_items_match_learner_batches`, for every preset); here: the registry,
the config fields each pipeline owns, the reading plans, the item sizes, and that
no module outside `distrl/pipelines/` (and the agents that declare a kind) names one.
"""

import ast
import pathlib

import numpy as np
import pytest

from distrl import agents, pipelines, resources
from distrl import config as config_lib
from distrl import experiment as experiment_lib

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("algorithm", sorted(agents.PRESETS))
def test_every_preset_has_its_kinds_pipeline(algorithm):
    config = config_lib.base_config(algorithm)
    pipeline = experiment_lib.Experiment(config).pipeline
    assert pipeline in pipelines.ALL
    assert pipeline.kind is experiment_lib.Experiment(config).agent_config.pipeline
    assert config.actor.unroll_length == pipeline.unroll_length


def test_each_field_belongs_to_one_pipeline_and_every_config_has_all():
    owners = {}
    for pipeline in pipelines.ALL:
        for section, values in pipeline.FIELDS.items():
            for name in values:
                key = f"{section}.{name}"
                assert key not in owners, f"{key}: {owners.get(key)} and {type(pipeline)}"
                owners[key] = type(pipeline).__name__
    for algorithm in agents.PRESETS:
        flat = config_lib.flatten(config_lib.base_config(algorithm).to_dict())
        assert set(owners) <= set(flat), algorithm


def test_queues_read_item_by_item_and_replay_reads_whole_batches():
    """A queue removes what it samples, so its reads lose none (one by one, one batch in
    flight); replay items stay in the table, so reads are 8 batches at once."""
    dqn, ppo, grpo = (config_lib.base_config(a) for a in ("dqn", "ppo", "grpo"))
    replay_plan = experiment_lib.Experiment(dqn).pipeline.reading(dqn)
    assert not replay_plan.consumed and replay_plan.batches_per_read == 8
    assert replay_plan.items_per_batch == 256 // (2 * 64)  # batch_size / (k x B)
    for config in (ppo, grpo):
        plan = experiment_lib.Experiment(config).pipeline.reading(config)
        assert plan.consumed and plan.batches_per_read == 1
        assert plan.in_flight == plan.items_per_batch == config.learner.batch_chunks


def test_item_sizes_come_from_the_example_item():
    """DQN: k x B transitions of 2 observations and 3 scalars; whole episodes: W x T
    steps (the window derived from the time limit: 100 steps of 4x4 in chunks of 64)."""
    dqn, grpo = config_lib.base_config("dqn"), config_lib.base_config("grpo")
    env = experiment_lib.Experiment(dqn).env
    per_transition = 8 * env.obs_size + 12
    transitions = experiment_lib.Experiment(dqn).pipeline
    assert transitions.item_bytes(dqn, env) == 2 * 64 * per_transition + 4  # + version
    episodes = experiment_lib.Experiment(grpo).pipeline
    window = episodes.example_item(grpo, env).data
    assert window.action.shape == (3 * 64, 64)  # ceil(100 / 64) + 1 chunks
    assert set(window.extras) == {"log_prob", "owned"}  # no V(s): GRPO has no critic
    ppo = config_lib.base_config("ppo")
    chunks = experiment_lib.Experiment(ppo).pipeline
    assert set(chunks.example_item(ppo, env).data.extras) == {"log_prob"}
    ppo.agent.clip_value = True  # the one reader of V(s) at acting time
    assert set(chunks.example_item(ppo, env).data.extras) == {"log_prob", "value"}


def test_a_huge_config_is_sized_without_allocating_its_items():
    """The memory estimate refuses 10**9 envs per actor; its example item takes no memory."""
    config = config_lib.base_config("ppo")
    config.actor.num_envs = 10**9
    item = experiment_lib.Experiment(config).pipeline.example_item(
        config, experiment_lib.Experiment(config).env
    )
    assert item.data.observation.strides[:2] == (0, 0)  # a broadcast zero
    assert np.asarray(item.data.observation).nbytes > 10**12
    with pytest.raises(config_lib.ConfigError, match="replay.queue_size=4 chunks"):
        resources.check_memory(experiment_lib.Experiment(config))


def _kind_references(path: pathlib.Path) -> list:
    """Lines of `path` that name a pipeline kind (`PipelineKind.X` or `Pipeline.X`)."""
    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, (ast.Attribute, ast.Name))
            and getattr(node.value, "attr", getattr(node.value, "id", None))
            in ("PipelineKind", "Pipeline")
            and node.attr in {k.name for k in agents.PipelineKind}
        ):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_no_module_outside_the_pipelines_branches_on_the_kind():
    """Only the agents (which declare their kind) and distrl/pipelines/ (which implement
    them) name a kind; every other stage asks its pipeline object."""
    allowed = {ROOT / "distrl" / "pipelines", ROOT / "distrl" / "agents"}
    found = []
    for folder in ("distrl", "launch", "benchmarks"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if not any(parent in allowed for parent in path.parents):
                found += _kind_references(path)
    assert found == []
