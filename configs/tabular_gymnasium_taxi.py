"""Tabular Q-learning (distrl's DQN learner with a table Q-network: replay, SGD, L2
loss; the `tabular` preset) on gymnasium's Taxi-v4, stepped in Python by the 2 actors
(`bases.gymnasium_taxi_to_optimum`; gymnasium 1.3.0, the pinned version, retired
Taxi-v3 for v4, whose default tables are v3's). Stops at a confirmed 98% of the
optimal expected return: the greedy mean return's 95% lower bound over 10,000
episodes >= +7.77, where pi* (shortest routes) makes +7.93 on average over Taxi's 300
start states (exact, from gymnasium's tables). The settings of configs/tabular_q.py.

Why a table and not DQN's MLP: the MLP's Q values fell together to the value of
wandering until the time limit and exploration never reached the +20 often enough,
so it never delivered; a table starts at 0 in every entry, above what any tried
action is worth, so untried actions keep being tried (docs/decisions.md, "98% of the
optimal return is J* - 0.02 |J*|"). What it reaches: docs/results.md,
"`tabular_gymnasium_taxi`".
"""

from configs.bases import gymnasium_taxi_to_optimum


def get_config():
    config = gymnasium_taxi_to_optimum("tabular")
    config.agent.epsilon_decay_steps = 20_000
    config.replay.samples_per_insert = 4.0
    return config
