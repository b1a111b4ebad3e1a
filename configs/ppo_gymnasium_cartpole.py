"""PPO on gymnasium's CartPole-v1, stepped in Python by the 2 actors: stops at a greedy
mean return whose 95% lower bound over 1,000 episodes is >= 475
(`bases.gymnasium_cartpole_to_475`). Fresh data as in configs/ppo.py: each actor acts
one chunk per params version, and the learner reads none ahead. What it reaches:
docs/results.md, "`ppo_gymnasium_cartpole`".
"""

from configs.bases import gymnasium_cartpole_to_475


def get_config():
    config = gymnasium_cartpole_to_475("ppo")
    config.actor.unroll_length = 32
    config.actor.chunks_per_version = 1
    config.learner.batch_chunks = 2  # one chunk per actor: 1,024 env steps per update
    config.learner.prefetch = 0
    config.replay.queue_size = 2
    config.agent.learning_rate = 1e-3
    config.agent.entropy_coef = 0.01
    config.agent.normalize_advantages = True
    return config
