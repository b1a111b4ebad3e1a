"""The bases several presets share: a problem, its stopping rule and its budget.

Each returns a full experiment config (`distrl.config.base_config` of the algorithm)
that a preset file then tunes: `from configs.bases import to_return`.
"""

import ml_collections

from distrl import cli
from distrl.config import base_config


def slippery_8x8_to_optimum(algorithm: str) -> ml_collections.ConfigDict:
    """The base of configs/*_slippery8x8.py: slippery 8x8, discount 0.99, a run that
    stops at a confirmed 98% of the exact optimum (`evaluator.target_of_optimal`), an
    evaluation every 100k env steps (so the env steps a run takes to its target do not
    depend on the machine's speed), a learning rate decaying to 1e-5, and a 6M env
    step / 900 s budget."""
    c = base_config(algorithm)
    c.env.update(dict(map="8x8", slippery=True))
    c.agent.update(dict(discount=0.99, learning_rate_final=1e-5))
    c.evaluator.update(dict(target_success=0.0, target_of_optimal=0.98, every_env_steps=100_000))
    c.budget.update(dict(env_steps=6_000_000, seconds=900.0))
    return c


def gymnasium_taxi_to_optimum(algorithm: str) -> ml_collections.ConfigDict:
    """The base of configs/*_gymnasium_taxi.py: gymnasium's Taxi-v4 (v3's tables and
    rewards: v4, gymnasium 1.3.0's, changed only is_rainy and fickle_passenger;
    gymnasium 1.3.0 has no Taxi-v3), stepped in Python by the actors (16 copies each),
    discount 0.99, a run that stops at a confirmed 98% of pi*'s undiscounted expected
    return over Taxi's 300 start states (+7.93 from the tables: `exact.return_target`,
    a mean return of +7.77 or more, the lower bound of 10,000 greedy episodes' 95%
    interval), 1,000-episode evaluations every 50k env steps (played on the
    evaluator's host) and a 3M env step / 900 s budget."""
    c = base_config(algorithm)
    c.env.name = "gymnasium:Taxi-v4"
    c.actor.num_envs = 16
    c.agent.discount = 0.99
    c.evaluator.update(
        dict(
            target_success=0.0,
            target_of_optimal=0.98,
            optimal_measure="return",
            every_env_steps=50_000,
        )
    )
    c.budget.update(dict(env_steps=3_000_000, seconds=900.0))
    return c


# MinAtar's network (Young & Tian 2019): one 3x3 conv of 16 channels, a dense layer of
# 128, ReLU; the agent fields of configs/*_breakout.py.
MINATAR_NETWORK = dict(
    torso="conv", conv_channels=(16,), conv_kernel=3, hidden_sizes=(128,), activation="relu"
)


def to_return(algorithm: str, env_name: str, target_return: float, confirm_envs: int = 1000):
    """The base of the configs of an env with a return target
    (configs/*_cartpole.py, *_breakout.py, and through `gymnasium_cartpole_to_475`
    configs/*_gymnasium_cartpole.py): `env_name`, a run that stops once the greedy
    mean return's 95% lower bound over `confirm_envs` episodes reaches `target_return`,
    100-episode evaluations every 8,192 env steps (distrl.local's too: its
    local.eval_every follows evaluator.every_env_steps; machine-independent),
    discount 0.99 and a 2M env step / 900 s budget."""
    c = base_config(algorithm)
    c.env.name = env_name
    c.agent.discount = 0.99
    c.evaluator.update(
        dict(
            target_return=float(target_return),
            num_envs=100,
            confirm_envs=confirm_envs,
            every_env_steps=8_192,
        )
    )
    c.budget.update(dict(env_steps=2_000_000, seconds=900.0))
    return c


def gymnasium_cartpole_to_475(algorithm: str) -> ml_collections.ConfigDict:
    """The base of configs/*_gymnasium_cartpole.py: `to_return` on gymnasium's
    CartPole-v1 (stepped in Python by the actors, 16 copies each) to 475, routine
    evaluations every 50k env steps (the evaluator plays them on its host: 1,000
    episodes of 500 steps are half a million env steps of its own)."""
    c = to_return(algorithm, "gymnasium:CartPole-v1", 475.0)
    c.actor.num_envs = 16
    c.agent.hidden_sizes = (64, 64)
    c.evaluator.every_env_steps = 50_000
    return c


def mujoco(algorithm: str) -> ml_collections.ConfigDict:
    """The base of configs/*_mujoco.py: `to_return` on gymnasium's MuJoCo HalfCheetah-v5
    (stepped in Python by the actors, 4 sync copies each; `--config.env.name=
    gymnasium:Hopper-v5` for Hopper) with no return target: the 1M env step budget of
    the published references (and 3,600 s), evaluated on 10 greedy episodes as
    CleanRL's evaluation plays (1,000 steps each, on the evaluator's host), each one
    a candidate for the kept best (confirm_envs 10), every 5,120 env steps."""
    c = to_return(algorithm, "gymnasium:HalfCheetah-v5", 0.0, confirm_envs=10)
    c.actor.num_envs = 4
    c.evaluator.update(dict(num_envs=10, every_env_steps=5_120))
    c.budget.update(dict(env_steps=1_000_000, seconds=3600.0))
    return c


def ppo_minatar(env_name: str, target_return: float) -> ml_collections.ConfigDict:
    """The base of configs/ppo_spaceinvaders.py, ppo_asterix.py and ppo_freeway.py:
    configs/ppo_breakout.py's agent, actors and evaluation on another MinAtar game, to
    `target_return` (gymnax's published PPO figure) within 5M env steps / 1,800 s."""
    config = cli.load_file("ppo_breakout")
    config.env.name = env_name
    config.evaluator.target_return = float(target_return)
    config.budget.update(dict(env_steps=5_000_000, seconds=1800.0))
    return config


def dqn_minatar(env_name: str, target_return: float) -> ml_collections.ConfigDict:
    """The base of configs/dqn_asterix.py, dqn_freeway.py and dqn_spaceinvaders.py:
    configs/dqn_breakout.py's agent, replay and actors on another MinAtar game, to
    `target_return` (MinAtar's DQN at 5M frames, read from its figure) within its 5M env
    step / 3,600 s budget; an evaluation every 131,072 env steps, as the PPO presets (a
    10M suite run plays 76 of them, not 610)."""
    config = cli.load_file("dqn_breakout")
    config.env.name = env_name
    config.evaluator.target_return = float(target_return)
    config.evaluator.every_env_steps = 131_072
    return config
