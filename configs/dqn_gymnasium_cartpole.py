"""Double DQN on gymnasium's CartPole-v1, stepped in Python by the 2 actors: stops at a
greedy mean return whose 95% lower bound over 1,000 episodes is >= 475
(`bases.gymnasium_cartpole_to_475`); a budget's end reports the best confirmed params
(`evaluator.keep_best`).

configs/dqn_cartpole.py's learning settings (the same dynamics in gymnax): one update
per 16 env steps (8 samples per inserted transition, batch 128), 1-step returns,
exploration from 1 to 0.05 over 20,000 env steps, an L2 TD loss and a learning rate
of 1e-3 falling linearly to 0 over the 1.5M env-step budget. Two changes aimed at
DQN's swings on CartPole (a balanced pole makes the replay nearly all upright states,
and the greedy policy flips on small action gaps): a replay of 1M transitions, so
early failures stay among the samples, and a Polyak target (0.5% per update) in place
of a copy every 500 updates, so the bootstrap target never jumps (docs/decisions.md,
"DQN on gymnasium CartPole learns as on gymnax's, with a Polyak target and a replay of
half the budget"). What it reaches: docs/results.md, "`dqn_gymnasium_cartpole`".
"""

from configs.bases import gymnasium_cartpole_to_475

BUDGET = 1_500_000  # env steps: the run's budget, and the learning rate's decay
SAMPLES_PER_INSERT, BATCH = 8.0, 128  # one update per 16 env steps


def get_config():
    config = gymnasium_cartpole_to_475("dqn")
    config.agent.update(
        dict(
            loss="l2",
            learning_rate=1e-3,
            learning_rate_decay_steps=round(BUDGET * SAMPLES_PER_INSERT / BATCH),  # updates
            target_update_period=1,  # updates: a Polyak step every update ...
            target_update_tau=0.005,  # ... of 0.5% (a time constant of 200 updates)
            epsilon_decay_steps=20_000,  # env steps
            epsilon_final=0.05,
        )
    )
    config.learner.batch_size = BATCH
    config.replay.update(
        dict(samples_per_insert=SAMPLES_PER_INSERT, max_size=1_000_000, min_size=1_024)
    )
    config.budget.env_steps = BUDGET
    return config
