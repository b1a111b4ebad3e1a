"""Double DQN on gymnax CartPole-v1: stops once the greedy mean return's 95% lower
bound over 1,000 episodes reaches 475 (`evaluator.target_return`, `confirm_envs`).

Tuned on seed 0 with distrl.local (benchmarks/README.md, "CartPole and
Breakout-MinAtar presets"): 8 samples per inserted transition (batch 128), a target
network copied every 500 updates, exploration from 1 to 0.05 over 20,000 env steps,
a learning rate of 1e-3 and a 50k-transition replay. DQN's greedy return on CartPole
swings between evaluations; the run stops at the first confirmed one.
"""

from distrl.config import to_return


def get_config():
    config = to_return("dqn", "gymnax:CartPole-v1", 475.0)
    config.agent.update(
        dict(
            learning_rate=1e-3,
            target_update_period=500,  # updates
            epsilon_decay_steps=20_000,  # env steps
            epsilon_final=0.05,
        )
    )
    config.actor.num_envs = 16
    config.learner.batch_size = 128
    config.replay.update(dict(samples_per_insert=8.0, max_size=50_016, min_size=1_024))
    return config
