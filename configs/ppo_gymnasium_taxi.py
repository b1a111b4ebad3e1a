"""PPO on gymnasium's Taxi-v4, stepped in Python by the 2 actors
(`bases.gymnasium_taxi_to_optimum`): stops at a confirmed 98% of pi*'s expected
return, the greedy mean return's 95% lower bound over 10,000 episodes >= +7.77 (pi*
makes +7.93 on average over Taxi's 300 start states, exact from gymnasium's tables).
The observation is a one-hot of the 500 states (distrl/envs/host_env.py).

Settings: configs/ppo_slippery8x8.py's (discount 0.99, GAE lambda 0.95, a learning
rate of 1e-3 decaying to 1e-5, the entropy bonus decaying from 0.05 to 0.005, 4
epochs x 4 minibatches, one chunk per update, PPO's (64,) tanh torsos) with 64 envs
per actor in place of 16: a batch of 1,024 env steps per update. The decays are
counted in updates and optimizer steps, so they are a quarter of the 8x8 preset's
to keep their pace in env steps (the entropy's over 2M env steps, the learning
rate's over 3M).

Why 64 envs: a random policy seldom delivers in its 200-step episodes, so the -10 of
an illegal pick-up or drop-off is learned before any +20, and with 16 envs the policy
stopped picking up and dropping off and never delivered again. The batch must hold
enough deliveries for the critic to learn their value before the -10s drive pick-up
and drop-off out: with 4x the env steps per update the same number of updates sees
4x the deliveries (docs/decisions.md, "98% of the optimal return is J* - 0.02
|J*|"). What it reaches: docs/results.md, "`ppo_gymnasium_taxi`".
"""

from configs.bases import gymnasium_taxi_to_optimum


def get_config():
    config = gymnasium_taxi_to_optimum("ppo")
    config.actor.num_envs = 64  # a batch of 1,024 env steps per update (see the docstring)
    config.agent.learning_rate = 1e-3
    config.agent.learning_rate_final = 1e-5
    config.agent.learning_rate_decay_steps = 48_000  # optimizer steps: 3M env steps
    config.agent.entropy_decay_steps = 2_000  # updates: 2M env steps
    config.agent.entropy_coef_final = 0.005
    config.learner.batch_chunks = 1  # chunks of [T, B] per update
    config.replay.queue_size = 4
    return config
