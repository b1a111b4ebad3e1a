"""Double DQN on gymnax SpaceInvaders-MinAtar with configs/dqn_breakout.py's settings, to MinAtar's
DQN return at 5M frames, about 43 (`bases.dqn_minatar`; Young & Tian 2019, read from the
Space Invaders panel of the MinAtar README's `img/learning_curves.gif`: 30 seeds, sticky actions,
the training episodes' moving average). What it reaches: docs/results.md, "`dqn_spaceinvaders`"."""

from configs.bases import dqn_minatar


def get_config():
    return dqn_minatar("gymnax:SpaceInvaders-MinAtar", 43)
