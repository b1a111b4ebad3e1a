"""Tabular Q-learning (DQN with a table network, SGD, L2 loss) on the 4x4 map."""

from distrl.config import base_config


def get_config():
    config = base_config("tabular")
    config.agent.epsilon_decay_steps = 20_000
    config.replay.samples_per_insert = 4.0
    return config
