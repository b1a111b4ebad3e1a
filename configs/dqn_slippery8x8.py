"""DQN on slippery 8x8: stops at 98% of the exact optimal success, confirmed.

Measured settings (benchmarks/README.md, "Slippery 8x8 against the exact optimum"):
discount 0.99 (under 0.9 the best policy only reaches 0.876 of 0.890), a learning
rate that decays to 1e-5, a slow target network and a long epsilon schedule. The
run ends once 10,000 greedy episodes put the success's lower bound at 98% of the
optimum's (`evaluator.target_of_optimal`), so the result is that confirmed policy.
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
    return config
