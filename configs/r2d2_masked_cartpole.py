"""R2D2 on gymnax CartPole-v1 with the cart's and the pole's velocities hidden
(`env.hidden_observation`): a policy must infer them from the positions it has seen;
stops once the greedy mean return's 95% lower bound over 1,000 episodes reaches 475,
as configs/ppo_masked_cartpole.py.

configs/r2d2_memory_chain.py's settings (sequences of 32 steps every 16, a burn-in of
8, 5-step double Q with value rescaling) with exploration decaying over 50k env steps;
a feed-forward policy balances only briefly here (docs/learning.md, "Memory tasks").
What it reaches: docs/results.md, "`r2d2_masked_cartpole`".
"""

from distrl import cli


def get_config():
    config = cli.load_file("r2d2_memory_chain")  # the same learner, on another task:
    config.env.update(dict(name="gymnax:CartPole-v1", kwargs="{}", hidden_observation=(1, 3)))
    config.evaluator.target_return = 475.0
    config.agent.epsilon_decay_steps = 50_000  # its one change: longer exploration
    return config
