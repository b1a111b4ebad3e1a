"""Recurrent PPO on gymnax MemoryChain-bsuite with a memory of 10 steps: the context bit
is seen at the first step only and asked for at the eleventh, so only a policy with
memory scores above chance (0); stops once the greedy mean return's 95% lower bound
over 1,000 episodes reaches 0.9.

configs/ppo_cartpole.py's settings with a GRU of 128 after each torso
(`agent.core`); a feed-forward policy (core "none") stays at chance on this task
(docs/learning.md, "Memory tasks"). What it reaches: docs/results.md,
"`ppo_memory_chain`".
"""

from configs.bases import to_return


def get_config():
    config = to_return("ppo", "gymnax:MemoryChain-bsuite", 0.9)
    config.env.kwargs = '{"memory_length": 10}'
    config.agent.update(
        dict(
            learning_rate=2.5e-4,
            entropy_coef=0.01,
            hidden_sizes=(64, 64),
            core="gru",
            core_size=128,
        )
    )
    config.actor.update(dict(num_envs=16, unroll_length=128, chunks_per_version=1))
    config.learner.batch_chunks = 2  # chunks of [T, B] per update: one per actor
    config.learner.prefetch = 0
    config.replay.queue_size = 2
    return config
