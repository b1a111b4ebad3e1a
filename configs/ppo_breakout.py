"""PPO on gymnax Breakout-MinAtar (10x10x4 boolean images, a conv torso): a 10M env step
budget, no return target.

Published references: MinAtar (Young & Tian 2019, arXiv:1903.03176) gives its DQN and
actor-critic learning curves on Breakout as figures (the MinAtar README's
`img/results.gif`), and gymnax-blines trains PPO on it for 10M env steps
(`agents/Breakout-MinAtar/ppo.yaml`; its curves are `docs/lcurves.png`); the only number
stated in their text is the random policy's return, 0.5 (MinAtar README). With no
published return we could read as a number, this config sets no target_return
(README, "Presets that learn", says what was measured here instead); set one with
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
