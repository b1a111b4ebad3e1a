"""Recurrent PPO on masked CartPole: gymnax CartPole-v1 with the two velocities hidden
(`env.hidden_observation`, elements 1 and 3), so the policy must infer them from the
positions it has seen; stops once the greedy mean return's 95% lower bound over 1,000
episodes reaches 475 (issue 39).

configs/ppo_cartpole.py's settings with a GRU of 128 after each torso
(`agent.core`); the feed-forward preset balances the masked pole for about 43 steps
(docs/learning.md, "Memory tasks").
"""

from distrl.config import to_return


def get_config():
    config = to_return("ppo", "gymnax:CartPole-v1", 475.0)
    config.env.hidden_observation = (1, 3)
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
