"""PPO with the Gaussian head on gymnasium's MuJoCo HalfCheetah-v5 (Box actions in
[-1, 1]^6), stepped in Python by 2 actors of 4 copies; Hopper-v5 with
`--config.env.name=gymnasium:Hopper-v5`. No return target: a 1M env step budget
(`bases.mujoco`), the policy kept is the best 10-episode greedy evaluation.

Settings as CleanRL's `ppo_continuous_action.py` (vwxyzjn/cleanrl, its `Args`): 2,048
env steps per update (2 actors x 4 copies x 256 steps, fresh data: one chunk per
actor per params version), 10 epochs of 32 minibatches, step size 3e-4 decayed
linearly to 0 over the 1M env steps (488 updates x 320 optimizer steps), discount
0.99, GAE lambda 0.95, clip 0.2 for the ratio, advantages normalised, no entropy
bonus, value weight 0.5, gradient clip 0.5, two hidden layers of 64 (tanh) for the
policy and the value apiece, a learned log std from 0, observations standardised by
running statistics (`agent.normalize_observations`, as CleanRL's NormalizeObservation
and the zoo's VecNormalize). Unlike theirs: no reward normalisation, so no value
clipping either (CleanRL clips V by 0.2 around the behaviour's V of *normalised*
rewards; on raw MuJoCo returns, V in the hundreds, that clip holds the critic back:
docs/decisions.md, "PPO on MuJoCo clips no value"), and the Gaussian is tanh-squashed
(`agents/distributions.py`).
Evaluated every 51,200 env steps (25 updates). Published return: the SB3 RL Zoo's
`benchmark.md` gives PPO 5,819 on HalfCheetah-v3 at 1M env steps (its tuned
`hyperparams/ppo.yml` settings, with VecNormalize). What distrl reaches:
docs/results.md, "`ppo_mujoco`" and "`ppo_mujoco@Hopper`".
"""

from configs.bases import mujoco


def get_config():
    config = mujoco("ppo")
    config.agent.update(
        dict(
            hidden_sizes=(64, 64),
            activation="tanh",
            discount=0.99,
            gae_lambda=0.95,
            learning_rate=3e-4,
            learning_rate_decay_steps=488 * 320,
            learning_rate_final=0.0,
            clip_epsilon=0.2,
            clip_value=False,  # see the docstring
            value_coef=0.5,
            entropy_coef=0.0,
            max_grad_norm=0.5,
            num_epochs=10,
            num_minibatches=32,
            normalize_advantages=True,
            normalize_observations=True,
        )
    )
    config.actor.update(dict(num_envs=4, unroll_length=256, chunks_per_version=1))
    config.learner.update(dict(batch_chunks=2, prefetch=0))
    config.replay.queue_size = 2
    config.evaluator.every_env_steps = 51_200
    return config
