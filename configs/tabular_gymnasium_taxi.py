"""Tabular Q-learning (distrl's DQN learner with a table Q-network: replay, SGD, L2
loss; the `tabular` preset) on gymnasium's Taxi-v4, stepped in Python by the 2
actors (issue 27 item 5, which names Taxi-v3: gymnasium 1.3.0, the pinned version,
retired it for v4, whose default tables are v3's; `config.gymnasium_taxi_to_optimum`).
Stops at a confirmed 98% of the optimal expected return: the greedy mean return's 95%
lower bound over 10,000 episodes >= +7.77, where pi* (shortest routes) makes +7.93 on
average over Taxi's 300 start states (exact, from gymnasium's tables). The settings
of configs/tabular_q.py.

Why a table and not DQN's MLP: with the settings of configs/dqn_gymnasium_cartpole.py
(seed 0), and again with epsilon decaying over 500k env steps to 0.1, the MLP's
greedy policy made -200 (never delivered, from any start) after 1.9M and 0.9M env
steps: in the second its Q values had fallen together to about -100, the value of
wandering until the time limit, its policy went north in 497 of 500 states, and
exploration never reached the +20 often enough (actor 0's success rate: 0, 1.9%). A
table starts at 0 in every entry, above what any tried action is worth, so untried
actions are tried. Seeds 41-43 (not tuned on): 3 of 3 confirmed, at 1.29M-1.42M env
steps, each greedy policy exactly optimal (benchmarks/README.md, "Issue 27 item 5").
"""

from configs.bases import gymnasium_taxi_to_optimum


def get_config():
    config = gymnasium_taxi_to_optimum("tabular")
    config.agent.epsilon_decay_steps = 20_000
    config.replay.samples_per_insert = 4.0
    return config
