"""PPO on gymnax Freeway-MinAtar with configs/ppo_breakout.py's settings, to gymnax's
published PPO return "R: 58" (`bases.ppo_minatar`; gymnax-blines' `Freeway-MinAtar/ppo.yaml`,
10M env steps, the sampled policy). What it reaches: docs/results.md, "`ppo_freeway`"."""

from configs.bases import ppo_minatar


def get_config():
    return ppo_minatar("gymnax:Freeway-MinAtar", 58)
