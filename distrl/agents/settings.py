"""The config fields several agents share, each declared once with its meaning and rule.

Every field is a setting of the experiment config's `agent` section
(`--config.agent.<field>=`). A group is a frozen, keyword-only dataclass that the
agents' configs inherit (with `ACTION_SPACES`, what they act in); its rules
(`*_RULES`, in `checks`' form, its bases' included) go into each config's `RULES`.
Every agent has `TorsoFields` and `LearningFields`; the Q-learning agents (DQN,
R2D2) add `QLearningFields`, the actor-critic network's (A2C, PPO)
`PolicyGradientFields`, the Box-action ones (SAC, TD3) `CriticFields`.

A field without a default is one whose value each algorithm chooses: its config
declares it again with that default (`learning_rate: float = 1e-2`), so a config's
own values stand in its class, and one that forgot a value cannot be built. Bases,
rather than a generated field list, keep `dataclasses.fields`, `asdict`, `replace`
and hashing working on a config as on any dataclass; keyword-only, because the
grouping decides the fields' order, which is no API.
"""

import dataclasses

from distrl import networks, spaces
from distrl.agents import base, checks


@dataclasses.dataclass(frozen=True, kw_only=True)
class TorsoFields:
    """The torso of every network an agent builds (`networks.torso_of` reads these)."""

    hidden_sizes: tuple[int, ...]  # widths of the MLP torso's hidden layers, in units (each
    # network's own torso: the Q network's; policy and value; the actor and each critic)
    activation: str  # the MLP's nonlinearity: "relu" | "tanh" | "elu"
    torso: str = "auto"  # "mlp" | "conv" (Conv2D layers, then the MLP) | "auto": conv on
    # image observations [H, W, C] (MinAtar's 10x10xC), the MLP on any other shape
    conv_channels: tuple[int, ...] = (16,)  # conv torso: output channels of each Conv2D layer
    conv_kernel: int = 3  # conv torso: square kernel side of every Conv2D layer, in pixels


TORSO_RULES = {
    "hidden_sizes": checks.SIZES,
    "activation": checks.one_of(*networks.ACTIVATIONS),
    "torso": checks.one_of(*networks.TORSOS),
    "conv_channels": checks.CHANNELS,
    "conv_kernel": checks.at_least(1),
}


@dataclasses.dataclass(frozen=True, kw_only=True)
class LearningFields:
    """The optimizer every agent steps (`base.optimizer_of` reads these) and its discount."""

    optimizer: str = "adam"  # "adam" | "sgd"
    learning_rate: float  # the optimizer's step size (SAC's, TD3's: their actor's)
    learning_rate_decay_steps: int = 0  # optimizer steps of linear decay to
    # learning_rate_final (one per update; PPO takes epochs x minibatches of them); 0: none
    learning_rate_final: float = 0.0  # the step size after the decay
    max_grad_norm: float  # global-norm gradient clip; <= 0 disables
    discount: float  # gamma per env step (the n-step writer's too, where there is one)


LEARNING_RULES = {
    "optimizer": checks.one_of(*base.OPTIMIZERS),
    "learning_rate": checks.POSITIVE,
    "learning_rate_decay_steps": checks.at_least(0),
    "learning_rate_final": checks.NONNEGATIVE,
    "max_grad_norm": checks.FINITE,
    "discount": checks.FRACTION,
}


@dataclasses.dataclass(frozen=True, kw_only=True)
class QLearningFields(TorsoFields, LearningFields):
    """A Q network's TD loss, target network and epsilon-greedy exploration (DQN, R2D2)."""

    ACTION_SPACES = (spaces.Discrete,)  # what it acts in (checks.check_action_space)

    activation: str = "relu"
    max_grad_norm: float = 10.0
    n_step: int  # env steps summed into one return before bootstrapping
    loss: str  # TD loss per step: "huber" | "l2" (0.5 td^2)
    huber_delta: float = 1.0  # TD error (in the learned Q's units) where the Huber loss
    # turns linear
    target_update_period: int  # learner updates between target refreshes
    target_update_tau: float = 1.0  # fraction moved at a refresh: 1 hard copy, < 1 Polyak
    epsilon_init: float = 1.0  # exploration probability at env step 0
    epsilon_final: float  # exploration probability after the decay
    epsilon_decay_steps: int  # env steps (all actors together) of linear decay


Q_LEARNING_RULES = {
    **TORSO_RULES,
    **LEARNING_RULES,
    "n_step": checks.at_least(1),
    "loss": checks.one_of("huber", "l2"),
    "huber_delta": checks.POSITIVE,
    "target_update_period": checks.at_least(1),
    "target_update_tau": checks.OPEN_FRACTION,
    "epsilon_init": checks.FRACTION,
    "epsilon_final": checks.FRACTION,
    "epsilon_decay_steps": checks.at_least(1),
}


@dataclasses.dataclass(frozen=True, kw_only=True)
class PolicyGradientFields(TorsoFields, LearningFields):
    """The actor-critic network and its policy-gradient loss's weights (A2C, PPO)."""

    ACTION_SPACES = (spaces.Discrete, spaces.Box)  # what it acts in (a softmax or a Gaussian)

    hidden_sizes: tuple[int, ...] = (64,)
    shared_torso: bool = False  # one torso for policy and value, else one each
    activation: str = "tanh"
    learning_rate: float = 1e-2
    gae_lambda: float = 0.95  # GAE / V-trace lambda (1: Monte-Carlo returns in the chunk)
    value_coef: float = 0.5  # weight of the value loss in the total loss
    entropy_coef: float = 0.05  # weight of the entropy bonus in the total loss
    entropy_decay_steps: int = 0  # updates of linear decay to entropy_coef_final; 0: none
    entropy_coef_final: float = 0.0  # the entropy bonus's weight after the decay
    normalize_advantages: bool = False  # advantages to zero mean, unit std over the batch
    # (True hurt PPO on 4x4)
    record_value: bool = False  # actors record V(s) in extras['value'] (PPO's clip_value
    # does anyway; else no learner reads it, and acting without it is faster)
    normalize_observations: bool = False  # standardise observations by running statistics
    # the learner keeps in the params (`networks.ObservationNorm`; MuJoCo's, as VecNormalize)
    core: str = "none"  # "none" (feed-forward) | "gru": a GRU after each torso, its state
    # carried by the actors and stored at each chunk's start (`agents.recurrent`)
    core_size: int = 128  # the GRU's width (core "gru")


POLICY_GRADIENT_RULES = {
    **TORSO_RULES,
    **LEARNING_RULES,
    "shared_torso": checks.FLAG,
    "gae_lambda": checks.FRACTION,
    "value_coef": checks.NONNEGATIVE,
    "entropy_coef": checks.NONNEGATIVE,
    "entropy_decay_steps": checks.at_least(0),
    "entropy_coef_final": checks.NONNEGATIVE,
    "normalize_advantages": checks.FLAG,
    "record_value": checks.FLAG,
    "normalize_observations": checks.FLAG,
    "core": checks.one_of(*networks.CORES),
    "core_size": checks.at_least(1),
}


@dataclasses.dataclass(frozen=True, kw_only=True)
class CriticFields(TorsoFields, LearningFields):
    """Twin Q critics learned from n-step replay, with Polyak targets and a random start
    (SAC, TD3; `agents.critics`)."""

    ACTION_SPACES = (spaces.Box,)  # what it acts in (checks.check_action_space)

    hidden_sizes: tuple[int, ...] = (256, 256)
    activation: str = "relu"
    learning_rate: float = 3e-4
    critic_learning_rate: float  # the critics' step size
    max_grad_norm: float = 0.0
    discount: float = 0.99
    n_step: int = 1  # env steps summed into one return before bootstrapping (the writer's)
    tau: float = 0.005  # Polyak step of the targets at each of their updates (SAC: every
    # update; TD3: every policy_delay-th)
    random_steps: int = 0  # env steps acted uniformly at random before the policy (critics.py)

    @property
    def pipeline(self) -> base.PipelineKind:
        """Sampled n-step transitions from a replay table."""
        return base.PipelineKind.REPLAY


CRITIC_RULES = {
    **TORSO_RULES,
    **LEARNING_RULES,
    "critic_learning_rate": checks.POSITIVE,
    "n_step": checks.at_least(1),
    "tau": checks.OPEN_FRACTION,
    "random_steps": checks.at_least(0),
}
