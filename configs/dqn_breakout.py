"""Double DQN on gymnax Breakout-MinAtar (10x10x4 boolean images, a conv torso): stops
once the greedy mean return's 95% lower bound over 1,000 episodes reaches 10, within a
5M env step budget.

Published references: MinAtar (Young & Tian 2019, arXiv:1903.03176) trains DQN on
Breakout for 5M frames: about 10 at 5M, read from its figure (sticky actions; a random
policy scores 0.5, MinAtar README); the gymnax README reports PPO at "R: 28" after 10M
env steps. What distrl reaches: docs/results.md, "`dqn_breakout`".

Settings after MinAtar's DQN: one 3x3 conv of 16 channels, then a dense layer of 128;
a 100k-transition replay; a target network copied every 1,000 updates; exploration
from 1 to 0.1 over the first 100k env steps; learning rate 2.5e-4 (Adam here, RMSProp
there); batches of 32 at 1 sample per inserted transition.
"""

from configs.bases import MINATAR_NETWORK, to_return


def get_config():
    config = to_return("dqn", "gymnax:Breakout-MinAtar", 10.0)
    config.agent.update(MINATAR_NETWORK)
    config.agent.update(dict(learning_rate=2.5e-4, epsilon_final=0.1))
    config.agent.target_update_period = 1_000  # updates
    config.agent.epsilon_decay_steps = 100_000  # env steps
    config.actor.num_envs = 16
    config.learner.batch_size = 32
    config.replay.update(dict(samples_per_insert=1.0, max_size=100_000, min_size=5_024))
    config.evaluator.every_env_steps = 16_384
    config.budget.update(dict(env_steps=5_000_000, seconds=3600.0))
    return config
