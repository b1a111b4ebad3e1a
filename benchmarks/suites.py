"""The standard suites: which preset runs on which env, at which budget, against which
published figure (docs/results.md's protocol). `benchmarks/suite_results.py` runs a
suite and writes its rows; `benchmarks/results_tables.py` fills README's and
docs/results.md's tables from them, one row per suite here, measured or not.

A published figure is a claim of someone else's, cited with its source; a suite
without one says so ("—"). Exact suites (a tabular env) are judged by the last
policy's exact success as a share of the optimum's (`distrl/envs/exact.py`), the
others by the last policy's mean return.
"""

from typing import NamedTuple

TD3_CURVES = (
    "the TD3 paper's curves (sfujim/TD3 `learning_curves/{env}/TD3_{env}-v1_*.npy`, "
    "gym v1): mean [min-max] of its 10 seeds at {steps}"
)
ZOO = (
    "SB3 RL Zoo `benchmark.md` (DLR-RM/rl-baselines3-zoo, 0088472b), one run, deterministic policy"
)
CLEANRL_PPO = (
    "CleanRL `ppo_continuous_action.py` (docs.cleanrl.dev, MuJoCo v4, tag pr-424), "
    "mean of its training episodes at 1M"
)
GYMNAX = "gymnax README (gymnax-blines PPO, 10M env steps; its sampled policy)"
GYMNAX_CHECKPOINT = "gymnax README's table (the return of gymnax-blines' PPO checkpoint)"
MINATAR = (
    "MinAtar paper's DQN (Young & Tian 2019, 30 seeds, sticky actions), read from its figure "
    "(kenjyoung/MinAtar 4241f24, img/learning_curves.gif)"
)
# The TD3 paper's 10 seeds at 300k env steps (index 60 of its 5,000-step evaluations)
HALFCHEETAH_300K = "7,697 [6,196-9,049]"
HOPPER_300K = "2,410 [912-3,547]"
EXACT = "`distrl/envs/exact.py` (dynamic programming on the env's tables)"
OPTIMUM = "the optimum"


class Suite(NamedTuple):
    """One standard suite: `configs/<config>.py` with `overrides` on `env`."""

    name: str  # the row's label (the config's name, or config@env for an env override)
    config: str
    env: str  # as the table shows it; `tests/test_benchmarks.py` checks it is the config's
    budget: int  # env steps: the published one where there is one, else the preset's
    published: str = "—"
    source: str = ""
    exact: bool = False  # judged by the exact share of the optimum (tabular envs)
    overrides: tuple = ()  # ((dotted field, value), ...) applied before the command's


def _preset(config: str, env: str, budget: int, published="—", source="", **kw) -> Suite:
    return Suite(config, config, env, budget, published, source, **kw)


def _mujoco(config: str, env: str, budget: int, published="—", source="", *extra) -> Suite:
    """A MuJoCo preset on `env` (gymnasium's v5, stepped in Python), `extra` overrides."""
    overrides = () if env == "HalfCheetah-v5" else (("env.name", f"gymnasium:{env}"),)
    name = config if not overrides else f"{config}@{env.split('-')[0]}"
    overrides += extra
    return Suite(name, config, f"gymnasium:{env}", budget, published, source, False, overrides)


# SAC and TD3 at 300k: a 10-episode evaluation every 15,360 env steps (20 points), not the
# preset's 5,120; in one process its 10,000 MuJoCo steps each would outnumber the
# training steps two to one (distrl.local_host). The judged figure, the last policy's, is
# the same.
_EVERY_15K = ("evaluator.every_env_steps", 15_360)


def _td3_curve(env: str, published: str) -> tuple:
    return published, TD3_CURVES.format(env=env, steps="300k"), _EVERY_15K


_EXACT = dict(exact=True)
_4X4 = ("dqn", "tabular_q", "a2c", "ppo", "vtrace", "reinforce", "grpo")
_SLIPPERY = ("dqn", "dqn_prioritized", "ppo", "a2c", "vtrace")
_MASKED = "gymnax:CartPole-v1 (velocities hidden)"

SUITES = (
    *(_preset(name, "4x4", 2_000_000, OPTIMUM, EXACT, **_EXACT) for name in _4X4),
    *(
        _preset(f"{name}_slippery8x8", "8x8 slippery", 4_000_000, OPTIMUM, EXACT, **_EXACT)
        for name in _SLIPPERY
    ),
    _preset(
        "ppo_gymnasium_frozenlake8x8",
        "gymnasium:FrozenLake8x8-v1",
        6_000_000,
        OPTIMUM,
        EXACT,
        **_EXACT,
    ),
    _preset("tabular_gymnasium_taxi", "gymnasium:Taxi-v4", 3_000_000, OPTIMUM, EXACT, **_EXACT),
    _preset("ppo_gymnasium_taxi", "gymnasium:Taxi-v4", 3_000_000, OPTIMUM, EXACT, **_EXACT),
    _preset("ppo_cartpole", "gymnax:CartPole-v1", 1_000_000, "500", GYMNAX_CHECKPOINT),
    _preset("dqn_cartpole", "gymnax:CartPole-v1", 2_500_000),
    _preset("ppo_gymnasium_cartpole", "gymnasium:CartPole-v1", 1_200_000),
    _preset("dqn_gymnasium_cartpole", "gymnasium:CartPole-v1", 1_500_000),
    _preset(
        "dqn_breakout", "gymnax:Breakout-MinAtar", 10_000_000, "about 10 at 5M frames", MINATAR
    ),
    _preset("dqn_asterix", "gymnax:Asterix-MinAtar", 10_000_000, "about 17 at 5M frames", MINATAR),
    _preset("dqn_freeway", "gymnax:Freeway-MinAtar", 10_000_000, "about 50 at 5M frames", MINATAR),
    _preset(
        "dqn_spaceinvaders",
        "gymnax:SpaceInvaders-MinAtar",
        10_000_000,
        "about 43 at 5M frames",
        MINATAR,
    ),
    _preset("ppo_breakout", "gymnax:Breakout-MinAtar", 10_000_000, "28", GYMNAX),
    _preset("ppo_spaceinvaders", "gymnax:SpaceInvaders-MinAtar", 10_000_000, "131", GYMNAX),
    _preset("ppo_asterix", "gymnax:Asterix-MinAtar", 10_000_000, "15", GYMNAX),
    _preset("ppo_freeway", "gymnax:Freeway-MinAtar", 10_000_000, "58", GYMNAX),
    _preset("sac_pendulum", "gymnax:Pendulum-v1", 20_000, "-157 at 20k", ZOO),
    _preset("td3_pendulum", "gymnax:Pendulum-v1", 20_000, "-152 at 20k", ZOO),
    _preset("ppo_pendulum", "gymnax:Pendulum-v1", 100_000, "-172 at 100k", ZOO),
    _preset("sac_gymnasium_pendulum", "gymnasium:Pendulum-v1", 20_000, "-157 at 20k", ZOO),
    _mujoco("ppo_mujoco", "HalfCheetah-v5", 1_000_000, "1,443", CLEANRL_PPO),
    _mujoco("ppo_mujoco", "Hopper-v5", 1_000_000, "2,383", CLEANRL_PPO),
    _mujoco("ppo_mujoco", "Walker2d-v5", 1_000_000, "2,288", CLEANRL_PPO),
    _mujoco("ppo_mujoco", "Ant-v5", 1_000_000),
    _mujoco("sac_mujoco", "HalfCheetah-v5", 300_000, *_td3_curve("HalfCheetah", HALFCHEETAH_300K)),
    _mujoco("sac_mujoco", "Hopper-v5", 300_000, *_td3_curve("Hopper", HOPPER_300K)),
    _mujoco("td3_mujoco", "HalfCheetah-v5", 300_000, *_td3_curve("HalfCheetah", HALFCHEETAH_300K)),
    _mujoco("td3_mujoco", "Hopper-v5", 300_000, *_td3_curve("Hopper", HOPPER_300K)),
    _preset("ppo_memory_chain", "gymnax:MemoryChain-bsuite", 2_000_000),
    _preset("ppo_masked_cartpole", _MASKED, 2_000_000),
    _preset("r2d2_memory_chain", "gymnax:MemoryChain-bsuite", 2_000_000),
    _preset("r2d2_masked_cartpole", _MASKED, 2_000_000),
)

BY_NAME = {suite.name: suite for suite in SUITES}


def target_off(config, env_steps: int) -> None:
    """The protocol's settings on a config: every target off, so that no evaluation
    stops the run; the budget `env_steps` alone ends it; the LAST policy reported
    (`evaluator.keep_best` off)."""
    config.evaluator.update(
        dict(target_of_optimal=0.0, target_success=0.0, target_return=0.0, keep_best=False)
    )
    config.budget.update(dict(env_steps=env_steps, seconds=0.0, learner_steps=0))
