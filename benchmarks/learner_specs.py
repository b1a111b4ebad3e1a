"""The update a learner benchmark times, as data: `BatchSpec` (the agent, one
observation's shape and dtype, the actions, the batch's shape) and random batches of it.

A preset's spec comes from its config (`describe`, which needs the full stack: the
configs load the data path) and is kept in `learner_presets.json` (`write_presets`;
`tests/test_benchmarks.py` checks that it matches the configs), so that a host with
only the pure-JAX packages (a TPU host) times the same updates as this one.
"""

import dataclasses
import json
import os
from typing import NamedTuple

import numpy as np

from benchmarks import rows
from distrl import agents
from distrl.types import QTransition, Transition

ALGOS = ("dqn", "ppo")
PRESETS = rows.CAPACITY  # the presets `learner.py --presets` times: the capacity section's
PRESETS_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "learner_presets.json")


class BatchSpec(NamedTuple):
    """One update's inputs: the agent (algorithm and its config's fields), one
    observation's shape and dtype, the actions, and the batch's shape: DQN [N]
    transitions, PPO [T, N] steps."""

    algorithm: str
    agent: dict
    observation_shape: tuple
    observation_dtype: str
    num_actions: int
    batch: tuple

    @property
    def samples(self) -> int:
        """Transitions per update."""
        return int(np.prod(self.batch))


def gridworld_spec(algorithm: str, batch: tuple, agent_config=None) -> BatchSpec:
    """The 4x4 gridworld's update (16 observation elements, 4 actions) with
    `agent_config` (a config dataclass; default: the algorithm's preset)."""
    agent_config = agent_config or agents.make_config(algorithm)
    return BatchSpec(algorithm, dataclasses.asdict(agent_config), (16,), "float32", 4, batch)


def describe(name: str) -> BatchSpec:
    """configs/<name>.py's update (needs the full stack: the configs load the data path)."""
    from benchmarks.common import load_config  # noqa: PLC0415
    from distrl import experiment as experiment_lib  # noqa: PLC0415

    config = load_config(name)
    experiment = experiment_lib.Experiment(config)
    spec, a = experiment.env.spec, config.actor
    batches = {
        "dqn": lambda: (config.learner.batch_size,),
        "ppo": lambda: (a.unroll_length, config.learner.batch_chunks * a.num_envs),
    }
    if config.algorithm not in batches:
        raise ValueError(f"{name}: algorithm {config.algorithm!r}; this benchmark times {ALGOS}")
    agent = dataclasses.asdict(experiment.agent_config)
    shape = tuple(spec.observation_shape or (spec.obs_size,))
    dtype = np.dtype(spec.observation_dtype).name
    return BatchSpec(
        config.algorithm, agent, shape, dtype, spec.num_actions, batches[config.algorithm]()
    )


def _tuples(x):
    """JSON's lists back into the tuples the agents' configs hold."""
    if isinstance(x, list):
        return tuple(_tuples(v) for v in x)
    if isinstance(x, dict):
        return {k: _tuples(v) for k, v in x.items()}
    return x


def load_presets(path: str = PRESETS_FILE) -> dict:
    """{name: BatchSpec} of `learner_presets.json`."""
    with open(path) as f:
        return {name: BatchSpec(**_tuples(spec)) for name, spec in json.load(f).items()}


def write_presets(names=PRESETS, path: str = PRESETS_FILE) -> None:
    """Describes `names` from their configs into `path` (sorted, one per key)."""
    specs = {name: describe(name)._asdict() for name in names}
    with open(path, "w") as f:
        f.write(json.dumps(specs, indent=1, sort_keys=True) + "\n")


def random_batch(spec: BatchSpec, rng: np.random.Generator):
    """A batch of `spec`'s shape: DQN QTransition [N], PPO Transition [T, N] with the
    behaviour extras {'log_prob'} (and 'value' where the agent reads it,
    `agents.base.records_value`); observations of 0s and 1s, actions in range."""
    lead = spec.batch

    def observations():
        shape = lead + tuple(spec.observation_shape)
        return (rng.random(shape) < 0.5).astype(spec.observation_dtype)

    action = rng.integers(0, spec.num_actions, lead).astype(np.int32)
    reward = rng.choice(np.float32([0, 0, 0, 1, -1]), lead)
    if spec.algorithm == "dqn":
        discount = rng.choice(np.float32([0.99, 0.99, 0.0]), lead)
        return QTransition(observations(), action, reward, discount, observations())
    log_prob = np.full(lead, -np.log(spec.num_actions), np.float32)
    reads_value = agents.base.records_value(agents.config_of(spec.algorithm, spec.agent))
    value = {"value": np.zeros(lead, np.float32)} if reads_value else {}
    return Transition(
        observation=observations(),
        action=action,
        reward=reward,
        discount=rng.choice(np.float32([1, 1, 1, 0]), lead),
        last=rng.random(lead) < 0.1,
        next_observation=observations(),
        extras={"log_prob": log_prob, **value},
    )
