"""Double DQN on gymnax Freeway-MinAtar with configs/dqn_breakout.py's settings, to MinAtar's
DQN return at 5M frames, about 50 (`bases.dqn_minatar`; Young & Tian 2019, read from the
Freeway panel of the MinAtar README's `img/learning_curves.gif`: 30 seeds, sticky actions,
the training episodes' moving average). What it reaches: docs/results.md, "`dqn_freeway`"."""

from configs.bases import dqn_minatar


def get_config():
    return dqn_minatar("gymnax:Freeway-MinAtar", 50)
