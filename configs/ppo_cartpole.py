"""PPO on gymnax CartPole-v1: stops once the greedy mean return's 95% lower bound over
1,000 episodes reaches 475 (`evaluator.target_return`, `evaluator.confirm_envs`).

Settings as PureJaxRL's and CleanRL's CartPole PPO (discount 0.99, entropy 0.01, two
hidden layers of 64, [128, 16] chunks per actor), except the step size: a learning
rate of 1e-3 falling linearly to 0 over the 1M env-step budget, as PureJaxRL's
annealed one does. CleanRL's constant 2.5e-4 learns, then falls back
(docs/decisions.md, "CartPole's presets decay their step size to 0, and DQN's takes
an L2 loss"). Fresh data in the distributed run as configs/ppo.py: one chunk per
actor per params version, both in one update. What it reaches: docs/results.md,
"`ppo_cartpole`".
"""

from configs.bases import to_return

BUDGET = 1_000_000  # env steps: the run's budget, and the learning rate's decay
STEPS_PER_UPDATE = 2 * 16 * 128  # batch_chunks x num_envs x unroll_length


def get_config():
    config = to_return("ppo", "gymnax:CartPole-v1", 475.0)
    config.agent.update(dict(learning_rate=1e-3, entropy_coef=0.01, hidden_sizes=(64, 64)))
    optimizer_steps = config.agent.num_epochs * config.agent.num_minibatches  # per update
    config.agent.learning_rate_decay_steps = BUDGET // STEPS_PER_UPDATE * optimizer_steps
    config.actor.update(dict(num_envs=16, unroll_length=128, chunks_per_version=1))
    config.learner.batch_chunks = 2  # chunks of [T, B] per update: one per actor
    config.learner.prefetch = 0
    config.replay.queue_size = 2
    config.budget.env_steps = BUDGET
    return config
