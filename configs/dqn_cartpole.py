"""Double DQN on gymnax CartPole-v1: stops once the greedy mean return's 95% lower
bound over 1,000 episodes reaches 475 (`evaluator.target_return`, `confirm_envs`).

8 samples per inserted transition (batch 128), a target network copied every 500
updates, exploration from 1 to 0.05 over 20,000 env steps and a 50k-transition replay.
Two changes keep it learned (docs/decisions.md, "CartPole's presets decay their step
size to 0, and DQN's takes an L2 loss"): an L2 TD loss, because the Huber loss caps
each transition's pull at that of a TD error of 1, and a failure's TD error is about Q
itself (near 100 at discount 0.99 once the pole balances): the rare terminal
transitions barely correct the values that lead to them; and a learning rate of 1e-3
falling linearly to 0 over the 2.5M env-step budget. What it reaches: docs/results.md,
"`dqn_cartpole`".
"""

from configs.bases import to_return

BUDGET = 2_500_000  # env steps: the run's budget, and the learning rate's decay
SAMPLES_PER_INSERT, BATCH = 8.0, 128  # one update per 16 env steps


def get_config():
    config = to_return("dqn", "gymnax:CartPole-v1", 475.0)
    config.agent.update(
        dict(
            loss="l2",
            learning_rate=1e-3,
            learning_rate_decay_steps=round(BUDGET * SAMPLES_PER_INSERT / BATCH),  # updates
            target_update_period=500,  # updates
            epsilon_decay_steps=20_000,  # env steps
            epsilon_final=0.05,
        )
    )
    config.actor.num_envs = 16
    config.learner.batch_size = BATCH
    config.replay.update(
        dict(samples_per_insert=SAMPLES_PER_INSERT, max_size=50_016, min_size=1_024)
    )
    config.budget.env_steps = BUDGET
    return config
