"""What an experiment needs of the machine: a memory estimate, checked up front.

`estimate_memory(experiment, local=False)` sums the big parts of a run from its config,
env spec and agent config (no agent is built): the replay table or queue (size x item
bytes), each node process's baseline and the actors' rollouts (num_actors x num_envs x
T), the network's parameters and optimizer state, the learner's batches and activations,
and the evaluator's episodes (all of one evaluation step together). `check_memory`
refuses (ConfigError) a config whose estimate exceeds this machine's memory and returns
a warning line when it exceeds what is available now. The figures are estimates, within
a factor of about two: enough to tell a run that fits from num_actors=10**6 or a replay
of 10**15 transitions."""

import dataclasses
import os

import numpy as np

from distrl import agents, networks
from distrl.acting import evaluation
from distrl.errors import ConfigError

GB = 1024**3
# One node process: Python, TensorFlow, Reverb, courier and JAX imported and an agent
# initialized and compiled: about the peak RSS of a DQN node on 4x4.
PROCESS_BYTES = 600 * 1024**2
_FLOAT = 4
_OPTIMIZER_COPIES = 6  # params, target, gradients, two Adam moments, the update


@dataclasses.dataclass(frozen=True)
class Estimate:
    """Bytes per part of a run; `parts` maps a part to (bytes, what drives it)."""

    parts: dict

    @property
    def total(self) -> int:
        return sum(b for b, _ in self.parts.values())

    def describe(self) -> str:
        big = sorted(self.parts.items(), key=lambda kv: -kv[1][0])
        return "; ".join(f"{name} {_gb(b)} ({why})" for name, (b, why) in big if b >= 1024**2)


def _gb(n: float) -> str:
    return f"{n / GB:,.1f} GB" if n >= 0.1 * GB else f"{n / 1024**2:,.0f} MB"


def param_count(agent_config, obs_shape, num_actions: int = 4) -> int:
    """Weights and biases of the agent's network (see distrl.networks).

    obs_shape: of one observation, or its size (an int: a flat vector)."""
    obs_shape = (obs_shape,) if isinstance(obs_shape, int) else tuple(obs_shape)
    obs_size = int(np.prod(obs_shape, dtype=np.int64))
    if _is_table(agent_config):
        return obs_size * num_actions
    conv, flat = _conv(agent_config, obs_shape)
    torso = conv + _mlp([flat, *agent_config.hidden_sizes])
    width = agent_config.hidden_sizes[-1] if agent_config.hidden_sizes else flat
    if isinstance(agent_config, agents.DQNConfig):
        return torso + _mlp([width, num_actions])
    if isinstance(agent_config, (agents.SACConfig, agents.TD3Config)):
        # an actor (num_actions: its head's outputs) and two critics on (obs, action)
        size = num_actions // 2
        critic = conv + _mlp([flat + size, *agent_config.hidden_sizes, 1])
        return torso + _mlp([width, num_actions]) + 2 * critic
    if isinstance(agent_config, agents.R2D2Config):  # torso, GRU, Q head
        size = agent_config.core_size
        return torso + 3 * size * (width + size + 1) + _mlp([size, num_actions])
    if agent_config.core != "none":  # a GRU after each torso (networks.make_recurrent_...)
        size = agent_config.core_size
        torso, width = torso + 3 * size * (width + size + 1), size
    heads = _mlp([width, num_actions]) + _mlp([width, 1])
    return torso * (1 if agent_config.shared_torso else 2) + heads


def policy_width(spec) -> int:
    """Outputs of the policy head: one per discrete action, or a Box's mean and log std
    per element (networks.make_actor_critic_network)."""
    return spec.num_actions or 2 * int(np.prod(spec.action_shape, dtype=np.int64))


def _is_table(agent_config) -> bool:
    return isinstance(agent_config, agents.DQNConfig) and agent_config.network == "table"


def _conv_channels(agent_config, obs_shape) -> tuple:
    """The conv torso's channels per layer; () for an MLP torso or the table."""
    return () if _is_table(agent_config) else networks.conv_channels(agent_config, obs_shape)


def _conv(agent_config, obs_shape) -> tuple:
    """(parameters of the conv layers, width of the features they flatten to); an MLP
    torso: (0, the observation's size). SAME padding keeps H x W (networks._torso)."""
    channels = _conv_channels(agent_config, obs_shape)
    if not channels:
        return 0, int(np.prod(obs_shape, dtype=np.int64))
    k2 = agent_config.conv_kernel**2
    ins = (obs_shape[-1], *channels[:-1])
    params = sum(k2 * c_in * c_out + c_out for c_in, c_out in zip(ins, channels))
    return params, obs_shape[0] * obs_shape[1] * channels[-1]


def _mlp(sizes) -> int:
    return sum(a * b + b for a, b in zip(sizes[:-1], sizes[1:]))


def estimate_memory(experiment, local: bool = False) -> Estimate:
    """Bytes the run of `experiment` needs: distributed (a process per node) or `local`
    (one process)."""
    config, env = experiment.config, experiment.env
    agent_config, pipeline = experiment.agent_config, experiment.pipeline
    spec, a = env.spec, config.actor
    obs = spec.obs_size
    obs_bytes = obs * np.dtype(spec.observation_dtype).itemsize
    act_bytes = (
        int(np.prod(spec.action_shape, dtype=np.int64)) * np.dtype(spec.action_dtype).itemsize
    )
    step = 2 * obs_bytes + act_bytes + 28  # a chunk's Transition: observations, action, scalars
    envs = a.num_envs * (config.num_actors if local else 1)
    rows = pipeline.batch_rows(config)
    params = param_count(agent_config, spec.observation_shape, policy_width(spec))
    act_width = sum(agent_config.hidden_sizes) if agent_config.hidden_sizes else obs
    channels = _conv_channels(agent_config, spec.observation_shape)
    if channels:  # a conv torso's feature maps: H x W per channel of each layer
        act_width += obs // spec.observation_shape[-1] * sum(channels)
    learner = params * _FLOAT * _OPTIMIZER_COPIES + rows * (act_width * _FLOAT * 6 + step) * (
        config.learner.prefetch + 2
    )
    rollout = a.unroll_length * envs * step * 3 + envs * act_width * _FLOAT * 2
    stored = pipeline.stored(config, env, local)
    sizes = f"hidden_sizes={tuple(agent_config.hidden_sizes)}: {params:,} parameters"
    parts = {"replay": stored, "learner": (learner, f"{sizes}, batch of {rows} rows")}
    # Every episode of an evaluation steps at once (evaluation.play_episodes): its
    # state, observations and activations, in and out of the loop's carry.
    e = config.evaluator
    greedy = not e.sampled
    episodes = evaluation.episodes_needed(env, max(e.num_envs, e.confirm_envs), greedy)
    per_episode = obs * _FLOAT * 3 + act_width * _FLOAT * 2 + 64
    parts["evaluator"] = (
        episodes * per_episode,
        f"evaluator.num_envs={e.num_envs:,}, confirm_envs={e.confirm_envs:,} episodes at once",
    )
    if local:
        parts["rollout"] = (rollout, f"unroll_length={a.unroll_length} x {envs} envs")
        parts["process"] = (PROCESS_BYTES, "one process")
    else:
        n = config.num_actors
        per_actor = PROCESS_BYTES + rollout + params * _FLOAT * 2
        parts["actors"] = (
            n * per_actor,
            f"num_actors={n} processes x {_gb(per_actor)}: "
            f"unroll_length={a.unroll_length} x num_envs={a.num_envs}",
        )
        parts["other nodes"] = (
            4 * PROCESS_BYTES + params * _FLOAT * 2,
            "replay, learner, counter, evaluator processes",
        )
    return Estimate(parts)


def machine_memory() -> tuple:
    """(total, available) bytes of this machine's memory, from /proc/meminfo."""
    info = {}
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                key, _, rest = line.partition(":")
                info[key] = int(rest.split()[0]) * 1024
    except OSError:
        pass
    total = info.get("MemTotal") or os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return total, info.get("MemAvailable", total)


def check_memory(experiment, local: bool = False):
    """ConfigError when the estimate exceeds this machine's memory; a warning line
    (or None) when it exceeds the memory available now."""
    estimate = estimate_memory(experiment, local)
    total, available = machine_memory()
    if estimate.total > total:
        raise ConfigError(
            f"this run needs an estimated {_gb(estimate.total)} of memory, more than this "
            f"machine's {_gb(total)}: {estimate.describe()}; lower those settings"
        )
    if estimate.total > available:
        return (
            f"warning: this run needs an estimated {_gb(estimate.total)} of memory and "
            f"{_gb(available)} is available now ({estimate.describe()})"
        )
    return None
