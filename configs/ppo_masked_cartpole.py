"""Recurrent PPO on masked CartPole: gymnax CartPole-v1 with the two velocities hidden
(`env.hidden_observation`, elements 1 and 3), so the policy must infer them from the
positions it has seen; stops once the greedy mean return's 95% lower bound over 1,000
episodes reaches 475.

configs/ppo_cartpole.py's settings with a GRU of 128 after each torso
(`agent.core`); the feed-forward preset balances the masked pole only briefly
(docs/learning.md, "Memory tasks"). What it reaches: docs/results.md,
"`ppo_masked_cartpole`".
"""

from distrl import cli


def get_config():
    config = cli.load_file("ppo_memory_chain")  # the same learner, on another task:
    config.env.update(dict(name="gymnax:CartPole-v1", kwargs="{}", hidden_observation=(1, 3)))
    config.evaluator.target_return = 475.0
    return config
