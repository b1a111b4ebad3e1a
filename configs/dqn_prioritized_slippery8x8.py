"""DQN with prioritized replay on slippery 8x8: configs/dqn_slippery8x8.py's settings
with a prioritized table (alpha 0.6, beta 0.4 -> 1 over the learning-rate decay's
30,000 updates), for the pipeline comparison (README, "The pipeline study").
"""

from distrl.config import slippery_8x8_to_optimum


def get_config():
    config = slippery_8x8_to_optimum("dqn")
    config.agent.learning_rate = 1e-3
    config.agent.learning_rate_decay_steps = 30_000  # updates
    config.agent.target_update_period = 500
    config.agent.epsilon_decay_steps = 500_000  # env steps
    config.agent.epsilon_final = 0.1
    config.replay.max_size = 102_400  # transitions (1,600 time steps of 64 envs)
    config.replay.samples_per_insert = 1.0  # each transition sampled about once
    config.replay.sampler = "prioritized"
    config.replay.priority_exponent = 0.6  # alpha
    config.replay.importance_exponent = 0.4  # beta at the first update
    config.replay.importance_anneal_updates = 30_000  # beta reaches 1 as the lr decay ends
    return config
