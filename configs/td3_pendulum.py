"""TD3 on gymnax Pendulum-v1 (Box actions in [-2, 2]): stops once the greedy mean
return's 95% lower bound over 1,000 episodes reaches -200 (`evaluator.target_return`,
`confirm_envs`).

Two hidden layers of 128 for the actor and each critic, batch 256, half an update per
env step (128 samples per inserted transition at batch 256), learning from 2,048
transitions on; exploration noise 0.1 and target smoothing noise 0.2 (of the [-1, 1]
range), the actor and targets updated every second critic update.
Its results: docs/learning.md, "Continuous control: Pendulum and MuJoCo".
"""

from configs.bases import to_return


def get_config():
    config = to_return("td3", "gymnax:Pendulum-v1", -200.0)
    config.agent.hidden_sizes = (128, 128)
    config.actor.num_envs = 8
    config.learner.batch_size = 256
    config.replay.update(dict(samples_per_insert=128.0, max_size=100_000, min_size=2_048))
    return config
