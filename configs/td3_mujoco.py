"""TD3 on gymnasium's MuJoCo HalfCheetah-v5 (Box actions in [-1, 1]^6), stepped in Python
by 2 actors of 4 copies; Hopper-v5 with `--config.env.name=gymnasium:Hopper-v5`. No
return target: a 1M env step budget (`config.mujoco`), the policy kept is the best
10-episode greedy evaluation.

Settings as CleanRL's `td3_continuous_action.py` (vwxyzjn/cleanrl, its `Args`): two
hidden layers of 256 (ReLU) for the actor and each critic, batch 256, one critic
update per env step (256 samples per inserted transition), step sizes 3e-4,
discount 0.99, Polyak 0.005, exploration noise 0.1 and target smoothing noise 0.2
clipped at 0.5 (of the [-1, 1] range), the actor and targets updated every second
critic update, a replay of 1M transitions, learning from 10,000 on (the SB3 RL Zoo's
`hyperparams/td3.yml` HalfCheetah entry and the TD3 paper's start; CleanRL waits
25,000), the actors acting uniformly at random until then (`random_steps`, as the
paper's `start_timesteps` and CleanRL do). Published return: the SB3 RL Zoo's
`benchmark.md` gives TD3 9,656 on HalfCheetah-v3 at 1M env steps. What distrl
reaches, per seed, with the env steps and seconds: docs/learning.md ("MuJoCo").
"""

from distrl.config import mujoco


def get_config():
    config = mujoco("td3")
    config.agent.update(
        dict(
            hidden_sizes=(256, 256),
            learning_rate=3e-4,
            critic_learning_rate=3e-4,
            tau=0.005,
            policy_delay=2,
            exploration_noise=0.1,
            policy_noise=0.2,
            noise_clip=0.5,
            random_steps=10_000,  # = replay.min_size: the first transitions random
        )
    )
    config.learner.batch_size = 256
    config.replay.update(dict(samples_per_insert=256.0, max_size=1_000_000, min_size=10_000))
    return config
