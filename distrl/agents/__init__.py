"""Stage 3 of the data flow: the learning algorithms as pure functions.

One module per algorithm (`dqn`, `actor_critic`, `ppo`, `r2d2`, and for Box actions
`sac`, `td3`), each with a frozen config
dataclass and `make_agent(config, env_spec) -> Agent`. `make_config(name)` gives
the named presets (tabular Q, REINFORCE, GRPO are configs of the
three agents); `make_agent` dispatches on the config type. The experiment config's
`agent` section is this package's (`section_defaults`: the preset's fields;
`check_section`: their values, and the agent on the experiment's env).
"""

import dataclasses
from typing import Any

from distrl import networks, spaces
from distrl.agents import actor_critic, base, checks, dqn, ppo, r2d2, sac, td3
from distrl.agents.actor_critic import ActorCriticConfig
from distrl.agents.base import Agent, EnvSpec, PipelineKind, TrainingState
from distrl.agents.dqn import DQNConfig
from distrl.agents.ppo import PPOConfig
from distrl.agents.r2d2 import R2D2Config
from distrl.agents.sac import SACConfig
from distrl.agents.td3 import TD3Config
from distrl.errors import ConfigError

# name -> (config class, preset overrides of its defaults)
PRESETS: dict[str, tuple] = {
    "dqn": (DQNConfig, {}),
    "tabular": (
        DQNConfig,
        {
            "network": "table",
            "optimizer": "sgd",
            "loss": "l2",
            # A step of 1/batch_size per sample: even a batch of one repeated entry
            # moves it by at most the full TD error (a larger step can diverge then).
            "learning_rate": 1.0,
            "max_grad_norm": 0.0,
            "target_update_period": 1,  # bootstrap from the current table
            "double_q": False,
        },
    ),
    "a2c": (ActorCriticConfig, {}),
    "reinforce": (ActorCriticConfig, {"use_critic": False, "gae_lambda": 1.0, "entropy_coef": 0.1}),
    "vtrace": (ActorCriticConfig, {"vtrace": True, "gae_lambda": 1.0}),
    "ppo": (PPOConfig, {}),
    "grpo": (PPOConfig, {"advantage": "grpo"}),
    "sac": (SACConfig, {}),
    "td3": (TD3Config, {}),
    "r2d2": (R2D2Config, {}),
}

_MAKERS = {
    DQNConfig: dqn.make_agent,
    ActorCriticConfig: actor_critic.make_agent,
    PPOConfig: ppo.make_agent,
    SACConfig: sac.make_agent,
    TD3Config: td3.make_agent,
    R2D2Config: r2d2.make_agent,
}


def make_config(name: str, **overrides: Any):
    """The config dataclass of a named preset (see PRESETS), with overrides."""
    if name not in PRESETS:
        raise ValueError(f"unknown algorithm {name!r}; pick one of {sorted(PRESETS)}")
    cls, preset = PRESETS[name]
    return cls(**{**preset, **overrides})


def check_actions(config, env_spec) -> None:
    """ValueError when the agent of `config` cannot act in the env's action space: a
    kind it does not take (DQN on a Box, SAC on a Discrete) or a Box shape its
    networks do not take (`networks.action_size`)."""
    space = base.action_space(getattr(env_spec, "spec", env_spec))
    try:
        checks.check_action_space(config, space)
    except ValueError as err:
        takes = sorted(n for n, (cls, _) in PRESETS.items() if isinstance(space, cls.ACTION_SPACES))
        raise ValueError(f"{err}; for these actions pick one of {', '.join(takes)}") from None
    if isinstance(space, spaces.Box):
        networks.action_size(space)


def make_agent(config, env_spec) -> Agent:
    """Builds the agent of any config dataclass above for an env spec (`EnvSpec`, an
    env's `distrl.envs.EnvSpec`, or an env, whose `spec` is taken)."""
    return _MAKERS[type(config)](config, _spec(env_spec))


def check_env(config, env_spec) -> None:
    """ValueError naming the field of agent config `config` that cannot work on this
    env (as `make_agent` takes it): a conv torso needs image observations [H, W, C].
    Checked before any node builds the agent."""
    networks.torso_kind(config.torso, _spec(env_spec).observation_shape)


def _spec(env_spec):
    return getattr(env_spec, "spec", env_spec)


def config_of(algorithm: str, fields: dict | None = None):
    """The config dataclass of preset `algorithm` with the experiment config's agent
    `fields`; ConfigError naming an unknown algorithm or the field that cannot work."""
    if algorithm not in PRESETS:
        raise ConfigError(
            f"config.algorithm={algorithm!r} is unknown; valid: {', '.join(sorted(PRESETS))}"
        )
    try:
        return make_config(algorithm, **(fields or {}))
    except (TypeError, ValueError) as err:
        raise ConfigError(f"config.agent.{err}") from None


def section_defaults(agent_config) -> dict:
    """The agent section: every field of the preset's config dataclass."""
    return {"agent": dataclasses.asdict(agent_config)}


def check_section(experiment) -> None:
    """The agent section's values (as its dataclass checks them), and the agent on the
    experiment's env: its observations (`check_env`) and actions (`check_actions`)."""
    agent_config, env = experiment.agent_config, experiment.env
    try:
        check_env(agent_config, env)
    except ValueError as err:
        raise ConfigError(f"config.agent.{err}") from None
    try:  # the algorithm, not a field of it, is what cannot act in these actions
        check_actions(agent_config, env)
    except ValueError as err:
        raise ConfigError(f"config.algorithm={experiment.config.algorithm!r}: {err}") from None


__all__ = [
    "PRESETS",
    "ActorCriticConfig",
    "Agent",
    "DQNConfig",
    "EnvSpec",
    "PPOConfig",
    "PipelineKind",
    "R2D2Config",
    "SACConfig",
    "TD3Config",
    "TrainingState",
    "actor_critic",
    "check_actions",
    "check_env",
    "check_section",
    "config_of",
    "dqn",
    "make_agent",
    "make_config",
    "section_defaults",
    "ppo",
    "r2d2",
    "sac",
    "td3",
]
