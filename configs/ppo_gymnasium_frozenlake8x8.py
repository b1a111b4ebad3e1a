"""PPO on gymnasium's FrozenLake8x8-v1 (slippery), stepped in Python by the actors: stops
at 98% of the exact optimal success computed from gymnasium's own transition tables
(`env.unwrapped.P`; issue 27 item 5). The settings of configs/ppo_slippery8x8.py
(the built-in gridworld on the same map, where a hole costs -1; here it pays 0, as
gymnasium's does). The 10,000-episode confirmations are played on the evaluator's
host (up to 200 steps each), so they are left to the touches of the routine
1,000-episode evaluations, every 100k env steps.
"""

from distrl.config import slippery_8x8_to_optimum


def get_config():
    config = slippery_8x8_to_optimum("ppo")
    config.env.name = "gymnasium:FrozenLake8x8-v1"  # env.map and env.slippery: unused
    config.agent.learning_rate = 1e-3
    config.agent.learning_rate_decay_steps = 192_000  # optimizer steps
    config.actor.num_envs = 16
    config.learner.batch_chunks = 1  # chunks of [T, B] per update
    config.replay.queue_size = 4
    return config
