"""SAC on gymnasium's MuJoCo HalfCheetah-v5 (Box actions in [-1, 1]^6), stepped in Python
by 2 actors of 4 copies; Hopper-v5 with `--config.env.name=gymnasium:Hopper-v5`. No
return target: a 1M env step budget (`bases.mujoco`), the policy kept is the best
10-episode greedy evaluation.

Settings as CleanRL's `sac_continuous_action.py` (vwxyzjn/cleanrl, its `Args`): two
hidden layers of 256 (ReLU) for the actor and each critic, batch 256, one update per
env step (256 samples per inserted transition), the actor's step 3e-4 and the
critics' and the temperature's 1e-3, discount 0.99, Polyak 0.005, a temperature
tuned to an entropy of -6 (minus the action size) from 1.0, a replay of 1M
transitions, learning from 5,000 on (CleanRL's `learning_starts`; the SB3 RL Zoo's
`hyperparams/sac.yml` HalfCheetah-v3 entry keeps SB3's defaults, the same but for
10,000). Published return: the SB3 RL Zoo's `benchmark.md` gives SAC 9,535 on
HalfCheetah-v3 at 1M env steps. What distrl reaches: docs/results.md,
"`sac_mujoco`".
"""

from configs.bases import mujoco


def get_config():
    config = mujoco("sac")
    config.agent.update(
        dict(
            hidden_sizes=(256, 256),
            learning_rate=3e-4,
            critic_learning_rate=1e-3,
            temperature_learning_rate=1e-3,
            tau=0.005,
            initial_temperature=1.0,
        )
    )
    config.learner.batch_size = 256
    config.replay.update(dict(samples_per_insert=256.0, max_size=1_000_000, min_size=5_000))
    return config
