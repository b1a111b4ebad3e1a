"""DQN (double, 3-step returns) on gymnasium's CartPole-v1, stepped in Python by the 2
actors (issue 27 item 5): stops at a greedy mean return whose 95% lower bound over
1,000 episodes is >= 475 (`config.gymnasium_cartpole_to_475`); a budget's end reports
the best confirmed params (`evaluator.keep_best`).
"""

from distrl.config import gymnasium_cartpole_to_475


def get_config():
    config = gymnasium_cartpole_to_475("dqn")
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
