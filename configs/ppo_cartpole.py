"""PPO on gymnax CartPole-v1: stops once the greedy mean return's 95% lower bound over
1,000 episodes reaches 475 (`evaluator.target_return`, `evaluator.confirm_envs`).

Settings as PureJaxRL's and CleanRL's CartPole PPO (discount 0.99, learning rate
2.5e-4, entropy 0.01, two hidden layers of 64, [128, 16] chunks per actor); the
env steps and seconds to the target per seed are in README ("Presets that learn").
Fresh data in the distributed run as configs/ppo.py: one chunk per actor per params
version, both in one update.
"""

from distrl.config import to_return


def get_config():
    config = to_return("ppo", "gymnax:CartPole-v1", 475.0)
    config.agent.update(dict(learning_rate=2.5e-4, entropy_coef=0.01, hidden_sizes=(64, 64)))
    config.actor.update(dict(num_envs=16, unroll_length=128, chunks_per_version=1))
    config.learner.batch_chunks = 2  # chunks of [T, B] per update: one per actor
    config.learner.prefetch = 0
    config.replay.queue_size = 2
    return config
