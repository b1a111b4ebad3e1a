"""SAC on gymnasium's Pendulum-v1, stepped in Python by the 2 actors: stops once the
greedy mean return's 95% lower bound over 1,000 episodes reaches -200.

configs/sac_pendulum.py (gymnax's Pendulum-v1, the same dynamics and reward) with
gymnasium's env in its place: 8 copies per actor in one synchronous vector env, the
policy's [-1, 1] scaled onto the env's [-2, 2] by the host stepper (docs/decisions.md,
"Where continuous actions are scaled"); the evaluator plays its episodes on its host.
Its results: docs/learning.md, "Continuous control: Pendulum and MuJoCo".
"""

from distrl import cli


def get_config():
    config = cli.load_file("sac_pendulum")
    config.env.name = "gymnasium:Pendulum-v1"
    return config
