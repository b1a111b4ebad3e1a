"""TD3 on gymnasium's MuJoCo HalfCheetah-v5 (Box actions in [-1, 1]^6), stepped in Python
by 2 actors of 4 copies; Hopper-v5 with `--config.env.name=gymnasium:Hopper-v5`. No
return target: a 1M env step budget (`bases.mujoco`), the policy kept is the best
10-episode greedy evaluation.

Settings as the TD3 paper's (Fujimoto et al. 2018; sfujim/TD3 `main.py` and `TD3.py`):
hidden layers of 400 and 300 (ReLU) for the actor and each critic, step sizes 1e-3,
batches of 104 (the paper's 100 rounded up to whole replay items of 2 steps x 4 envs),
one critic update per env step (104 samples per inserted transition), discount 0.99,
Polyak 0.005, exploration noise 0.1 and target smoothing noise 0.2 clipped at 0.5 (of
the [-1, 1] range), the actor and targets updated every second critic update, a replay
of 1M transitions, learning from 10,000 on with the actors acting uniformly at random
until then (`random_steps`, the paper's `start_timesteps`); CleanRL's settings (layers
of 256, batch 256, step sizes 3e-4) kept less (docs/decisions.md, "TD3 on MuJoCo takes
the paper's settings and a random start"). Published return: the paper's curves,
3,988 at 55k env steps on HalfCheetah-v1; the SB3 RL Zoo's `benchmark.md` gives TD3
9,656 on HalfCheetah-v3 at 1M env steps. What distrl reaches: docs/results.md,
"`td3_mujoco`".
"""

from configs.bases import mujoco


def get_config():
    config = mujoco("td3")
    config.agent.update(
        dict(
            hidden_sizes=(400, 300),
            learning_rate=1e-3,
            critic_learning_rate=1e-3,
            tau=0.005,
            policy_delay=2,
            exploration_noise=0.1,
            policy_noise=0.2,
            noise_clip=0.5,
            random_steps=10_000,  # = replay.min_size: the first transitions random
        )
    )
    config.learner.batch_size = 104
    config.replay.update(dict(samples_per_insert=104.0, max_size=1_000_000, min_size=10_000))
    return config
