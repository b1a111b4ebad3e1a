"""PPO on gymnax SpaceInvaders-MinAtar (10x10x6 boolean images), the settings of
configs/ppo_breakout.py with only the env changed: a second MinAtar game measured with
the same agent. A run stops once the sampled policy's mean return over 1,000 episodes
has a 95% lower bound >= 131, gymnax's published PPO figure, or at its 5M env step /
1,800 s budget, keeping its best confirmed policy.

Published reference: the gymnax README reports PPO on SpaceInvaders-MinAtar at
"R: 131" (gymnax-blines, `agents/SpaceInvaders-MinAtar/ppo.yaml`: 10M env steps, 64
envs of 128 steps, 4 epochs x 8 minibatches, learning rate 5e-4, entropy 0.01, the
256x256 "Categorical-MLP", discount 0.999; the sampled policy evaluated). This preset
keeps ppo_breakout's discount 0.99 and stops at half those env steps, so that a seed
fits in minutes here. What it reaches: docs/results.md, "`ppo_spaceinvaders`".
"""

from configs.bases import ppo_minatar


def get_config():
    return ppo_minatar("gymnax:SpaceInvaders-MinAtar", 131)
