"""PPO on gymnax Asterix-MinAtar with configs/ppo_breakout.py's settings, to gymnax's
published PPO return "R: 15" (`bases.ppo_minatar`; gymnax-blines' `Asterix-MinAtar/ppo.yaml`,
10M env steps, the sampled policy). What it reaches: docs/results.md, "`ppo_asterix`"."""

from configs.bases import ppo_minatar


def get_config():
    return ppo_minatar("gymnax:Asterix-MinAtar", 15)
