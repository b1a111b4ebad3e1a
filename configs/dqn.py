"""DQN with a replay table on the non-slippery 4x4 map, 2 actors (the default run)."""

from distrl.config import base_config


def get_config():
    config = base_config("dqn")
    config.agent.learning_rate = 3e-3
    config.agent.target_update_period = 100
    config.agent.epsilon_decay_steps = 20_000
    config.replay.samples_per_insert = 4.0
    return config
