"""The experiment config: its schema, and its checks before anything starts.

An experiment is one `ml_collections.ConfigDict` (see `configs/*.py`). Its sections
each have one owner, the module that reads them (`OWNERS`), which declares their
fields with their defaults, `section_defaults(agent_config) -> {section: {field:
default}}` (a comment beside each default says what it means, in which unit), and
checks their values, `check_section(experiment)` (ConfigError): the agent's
(`distrl.agents`: every field of the preset's config dataclass), env
(`distrl.envs.section`), actor, replay and learner (`distrl.pipelines`), evaluator and
budget (`distrl.evaluator_config`), log (`distrl.metrics`), checkpoint
(`distrl.checkpoints.learner`), and the launchers' restart, ray and local
(`distrl.launch_config`). The config's own fields (algorithm, seed, num_actors,
run_dir) are here. The same config drives the distributed program (`launch/train.py`)
and the single-process trainer (`python -m distrl.local`).

`base_config` is the config of an algorithm with every default; `validate` checks an
experiment's config (`distrl.experiment.make` calls it) in one pass and raises
`ConfigError` naming the bad value and what would be valid; `from_dict` rebuilds a
saved config, `upgrade` brings an older one up to date.
"""

import dataclasses
import json
import math

import ml_collections

from distrl import agents, checkpoints, evaluator_config, launch_config, metrics, pipelines
from distrl.envs import section as env_section
from distrl.errors import ConfigError, at_least
from distrl.errors import check as _check

LAUNCH_TYPES = ("local_mp", "test_mt", "ray")
# The sections' owners, in the order their checks run.
OWNERS = (
    launch_config,  # restart, ray, local
    env_section,  # env
    agents,  # agent (its values, then the agent on the env)
    evaluator_config,  # evaluator, budget
    pipelines,  # actor, replay, learner
    metrics,  # log
    checkpoints.learner,  # checkpoint
)


def base_config(algorithm: str) -> ml_collections.ConfigDict:
    """The config of preset `algorithm` with every field at its default; `configs/*.py`
    override them. ConfigError for an unknown algorithm."""
    preset = agents.config_of(algorithm)
    c = ml_collections.ConfigDict()
    c.algorithm = algorithm  # a preset of distrl.agents.PRESETS (fixed by the config file)
    c.seed = 0  # PRNG seed of every node (0 .. 2**31-1)
    c.num_actors = 2  # actor processes
    c.run_dir = ""  # everything a run writes goes here; "" -> runs/<algorithm>-<timestamp>
    for owner in OWNERS:
        for section, fields in owner.section_defaults(preset).items():
            c[section] = ml_collections.ConfigDict(fields)
    return c


# Fields added after runs were saved, with the value those runs had (their items and
# replay checkpoints have that layout): what `upgrade` fills in.
ADDED_LATER = {
    "replay.item_steps": 1,
    "learner.batches_per_read": 1,
    "learner.updates_in_flight": 0,
    "learner.updates_per_call": 1,
    "learner.device": "auto",
    "evaluator.every_env_steps": 0,
    "env.name": env_section.GRIDWORLD,
    "env.kwargs": "{}",
    "env.vector": "sync",
    "env.step_timeout_s": 60.0,
    "env.hidden_observation": (),
    "evaluator.target_return": 0.0,
    "evaluator.optimal_measure": "success",
    # runs before the conv torso flattened every observation into the MLP
    "agent.torso": "mlp",
    "agent.conv_channels": (16,),
    "agent.conv_kernel": 3,
    # runs before actors followed a Ray cluster
    "ray.actors": "fixed",
    "ray.min_actors": 1,
    "ray.max_actors": 0,
}


# Agent fields added later to some algorithms only (the actor-critics: their recurrent core,
# record_value): filled in where the saved algorithm's agent section has them.
ADDED_LATER_TO_AGENTS = {
    "agent.core": "none",  # runs before recurrent cores were feed-forward
    "agent.core_size": 128,
    # runs before the actors acted without the critic recorded V(s) in every item
    "agent.record_value": True,
    "agent.normalize_observations": False,  # runs before it fed raw observations
}


def upgrade(saved: dict) -> dict:
    """A saved config (flat {'a.b': value}) of any earlier distrl as this version's: each
    field added since (`ADDED_LATER`, and `ADDED_LATER_TO_AGENTS` where its algorithm has
    the field) with the value that run had. The one place old configs are read
    differently; nothing downstream supplies a default."""
    added = dict(ADDED_LATER)
    algorithm = saved.get("algorithm")
    if algorithm in agents.PRESETS:
        fields = {f.name for f in dataclasses.fields(agents.config_of(algorithm))}
        added.update(
            {k: v for k, v in ADDED_LATER_TO_AGENTS.items() if k.split(".", 1)[1] in fields}
        )
    return {**added, **saved}


def from_dict(saved: dict) -> ml_collections.ConfigDict:
    """A saved config (config.json) as a typed config of its algorithm's base.

    A field added after the run was saved takes the value that run had (`upgrade`:
    `replay.item_steps` 1, the layout of its items and replay checkpoints).
    ConfigError when it is not a dict, names an unknown algorithm, lacks any other
    field (an older distrl wrote it) or has one the base does not know, or a value
    of the wrong type.
    """
    if not isinstance(saved, dict):
        raise ConfigError(f"a saved config must be a JSON object, got {type(saved).__name__}")
    config = base_config(saved.get("algorithm"))
    saved = upgrade(flatten(saved))
    _check_keys(saved, flatten(config.to_dict()), "config")
    for key, value in saved.items():
        _assign(config, key, value)
    return config


def _nest(flat: dict) -> dict:
    """{'a.b': 1} -> {'a': {'b': 1}}."""
    tree = {}
    for key, value in flat.items():
        *parents, leaf = key.split(".")
        node = tree
        for name in parents:
            node = node.setdefault(name, {})
        node[leaf] = value
    return tree


def load_json(path: str) -> ml_collections.ConfigDict:
    """A config.json as `from_dict` reads it; ConfigError naming the file's problem."""
    try:
        with open(path) as f:
            saved = json.load(f)
    except OSError as err:
        raise ConfigError(f"cannot read {path}: {err.strerror}") from None
    except ValueError as err:
        raise ConfigError(f"{path} is not valid JSON: {err}") from None
    try:
        return from_dict(saved)
    except ConfigError as err:
        raise ConfigError(f"{path}: {err}") from None


def _assign(config, key: str, value) -> None:
    """config.<key> = value through the base's type (ConfigError on a mismatch)."""
    *parents, leaf = key.split(".")
    node = config
    for name in parents:
        node = node[name]
    try:
        node[leaf] = tuple(value) if isinstance(value, list) else value
    except TypeError:
        kind = type(node[leaf]).__name__
        raise ConfigError(f"config.{key}={value!r} is not of type {kind}") from None


def _check_keys(have: dict, want: dict, where: str) -> None:
    """ConfigError naming fields `have` has that `want` lacks, or lacks (flat dicts,
    {'a.b': value}: any depth)."""
    unknown = sorted(set(have) - set(want))
    missing = sorted(set(want) - set(have))
    if unknown:
        key = unknown[0]
        parent = key.rpartition(".")[0]
        siblings = sorted(k.rpartition(".")[2] for k in want if k.rpartition(".")[0] == parent)
        raise ConfigError(
            f"{where}.{key} is unknown ({len(unknown)} unknown: {', '.join(unknown)}); "
            f"valid fields{' of ' + where + '.' + parent if parent else ''}: {', '.join(siblings)}"
        )
    if missing:
        more = f", ... ({len(missing)} in all)" if len(missing) > 6 else ""
        shown = ", ".join(missing[:6]) + more
        raise ConfigError(
            f"{where} lacks {shown} (written by an older distrl, or removed "
            f"by the config file); every field of distrl.config.base_config is needed"
        )


def flatten(tree: dict, prefix: str = "") -> dict:
    """{'a': {'b': 1}} -> {'a.b': 1}."""
    flat = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            flat.update(flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def validate(experiment) -> None:
    """Raises ConfigError for any value of `experiment.config` that cannot work; returns
    None otherwise (`distrl.experiment.make` calls it).

    One pass: the config's shape and types and its own fields here, then each section
    by its owner (`OWNERS`), against the experiment's env and agent config."""
    config = experiment.config
    given = flatten(config.to_dict())
    base = flatten(base_config(config.algorithm).to_dict())  # ConfigError: unknown algorithm
    _check_keys(given, base, "config")
    _check_types(given, base)
    _check_own(given)  # seed, num_actors
    for owner in OWNERS:
        owner.check_section(experiment)


def _check_types(have: dict, base: dict) -> None:
    """Each value has its base field's type (an int where a float is wanted is fine);
    flat dicts."""
    for key, default in base.items():
        value, kind = have[key], type(default)
        if kind is float:
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        elif kind is int:
            ok = isinstance(value, int) and not isinstance(value, bool)
        elif kind in (tuple, list):
            ok = isinstance(value, (tuple, list))
        else:
            ok = isinstance(value, kind)
        _check(ok, f"config.{key}={value!r} is a {type(value).__name__}; need a {kind.__name__}")
        if kind is float:
            _check(math.isfinite(value), f"config.{key}={value!r}; need a finite number")


# The config's own fields: integers with their lowest value.
_LOWEST = {"num_actors": 1, "seed": 0}


def _check_own(flat: dict) -> None:
    at_least(flat, _LOWEST)
    _check(flat["seed"] < 2**31, f"config.seed={flat['seed']}; need 0 .. 2**31-1")
