"""DQN (double, 3-step returns) on gymnasium's Taxi-v4, stepped in Python by the 2 actors
(issue 27 item 5, which names Taxi-v3: gymnasium 1.3.0, the pinned version, retired it
for v4, whose default tables are v3's; `config.gymnasium_taxi_to_optimum`). Stops at a
confirmed 98% of the optimal expected return: the greedy mean return's 95% lower bound
over 10,000 episodes >= +7.77, where pi* (shortest routes) makes +7.93 on average over
Taxi's 300 start states (exact, from gymnasium's tables). The settings of
configs/dqn_gymnasium_cartpole.py.
"""

from distrl.config import gymnasium_taxi_to_optimum


def get_config():
    config = gymnasium_taxi_to_optimum("dqn")
    a = config.agent
    a.n_step = 3
    a.learning_rate = 5e-4
    a.target_update_period = 200
    a.epsilon_final = 0.02
    a.epsilon_decay_steps = 50_000
    config.replay.max_size = 100_000
    config.replay.min_size = 4_096
    config.learner.batch_size = 256
    return config
