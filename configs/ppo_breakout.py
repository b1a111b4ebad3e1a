"""PPO on gymnax Breakout-MinAtar (10x10x4 boolean images, a conv torso): a 10M env step
budget, no return target.

Published references: the gymnax README reports PPO on Breakout-MinAtar at "R: 28"
after 10M env steps, and the gymnax-blines training log behind it (its settings:
`agents/Breakout-MinAtar/ppo.yaml`) reads 20.6 at 5M; MinAtar (Young & Tian 2019,
arXiv:1903.03176) gives DQN about 10 at 5M frames, read from its figure (sticky
actions); a random policy scores 0.5 (MinAtar README). This config sets no
target_return yet (issue 37 aims at a 95% lower bound >= 28 within 10M env steps;
README, "Configs and what they reach", says what was measured here); set one with
--config.evaluator.target_return=<return>.

Settings after gymnax-blines' (64 envs of [128] steps, 4 epochs x 8 minibatches,
learning rate 5e-4, entropy 0.01) on MinAtar's network: one 3x3 conv of 16 channels,
then a dense layer of 128.
"""

from distrl.config import MINATAR_NETWORK, to_return


def get_config():
    config = to_return("ppo", "gymnax:Breakout-MinAtar", 0.0)
    config.agent.update(MINATAR_NETWORK)
    config.agent.update(dict(learning_rate=5e-4, entropy_coef=0.01, num_minibatches=8))
    config.actor.update(dict(num_envs=32, unroll_length=128, chunks_per_version=1))
    config.learner.batch_chunks = 2  # chunks of [T, B] per update: one per actor
    config.learner.prefetch = 0
    config.replay.queue_size = 2
    config.evaluator.every_env_steps = 16_384
    config.budget.update(dict(env_steps=10_000_000, seconds=3600.0))
    return config
