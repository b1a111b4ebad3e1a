"""PPO on gymnax Asterix-MinAtar (10x10x4 boolean images), the settings of
configs/ppo_breakout.py with only the env changed. A run stops once the sampled
policy's mean return over 1,000 episodes has a 95% lower bound >= 15, gymnax's published
PPO figure, or at its 5M env step / 1,800 s budget, keeping its best confirmed policy.

Published reference: the gymnax README reports PPO on Asterix-MinAtar at "R: 15"
(gymnax-blines, `agents/Asterix-MinAtar/ppo.yaml`, 10M env steps; the sampled policy
evaluated). The suite judges the last policy at 10M (`benchmarks/suites.py`). What it
reaches: docs/results.md, "`ppo_asterix`".
"""

from distrl import cli


def get_config():
    config = cli.load_file("ppo_breakout")  # its agent, actors and evaluation, then:
    config.env.name = "gymnax:Asterix-MinAtar"
    config.evaluator.target_return = 15.0
    config.budget.update(dict(env_steps=5_000_000, seconds=1800.0))
    return config
