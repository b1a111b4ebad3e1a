"""PPO on gymnax Breakout-MinAtar (10x10x4 boolean images): a run that stops once the
sampled policy's mean return over 1,000 episodes has a 95% lower bound >= 28 (gymnax's
published PPO figure), within a 10M env step / 3,600 s budget.

Published references: the gymnax README reports PPO on Breakout-MinAtar at "R: 28"
after 10M env steps, and the gymnax-blines training log behind it reads 20.6 at 5M.
Its settings (`agents/Breakout-MinAtar/ppo.yaml`): 64 envs of 128 steps, 4 epochs x 8
minibatches, learning rate 5e-4, entropy 0.01, gradient clip 0.5, and a
"Categorical-MLP" of two hidden ReLU layers of 256 over the flattened image; its
`utils/ppo.py` evaluates the sampled policy (`pi.sample`), so this preset does too
(`evaluator.sampled`; `launch/evaluate.py` plays it the same way; docs/decisions.md,
"The MinAtar PPO presets take gymnax-blines' MLP and judge the sampled policy"). Its
discount is 0.999; this preset keeps 0.99. MinAtar (Young & Tian 2019,
arXiv:1903.03176) gives DQN about 10 at 5M frames, read from its figure (sticky
actions); a random policy scores 0.5 (MinAtar README). What distrl reaches, judged on
the sampled and on the greedy policy: docs/results.md, "`ppo_breakout`".
"""

from configs.bases import to_return


def get_config():
    config = to_return("ppo", "gymnax:Breakout-MinAtar", 28.0)
    config.agent.update(
        dict(
            torso="mlp",
            hidden_sizes=(256, 256),
            activation="relu",  # as gymnax-blines' (tanh learned far less)
            learning_rate=5e-4,
            entropy_coef=0.01,
            num_minibatches=8,
        )
    )
    config.actor.update(dict(num_envs=32, unroll_length=128, chunks_per_version=1))
    config.learner.batch_chunks = 2  # chunks of [T, B] per update: one per actor
    config.learner.prefetch = 0
    config.replay.queue_size = 2
    # 131,072 env steps (1.3% of the budget): at 16,384 the 610 evaluations of a 10M run
    # played some 4x the training's env steps (100 episodes of up to 1,000 steps each)
    config.evaluator.every_env_steps = 131_072
    config.evaluator.sampled = True  # as gymnax-blines evaluates (see above)
    config.budget.update(dict(env_steps=10_000_000, seconds=3600.0))
    return config
