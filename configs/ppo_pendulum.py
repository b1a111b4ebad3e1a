"""PPO with the Gaussian head on gymnax Pendulum-v1 (Box actions in [-2, 2]): stops once
the greedy (mean action) return's 95% lower bound over 1,000 episodes reaches -200
(`evaluator.target_return`, `confirm_envs`).

Continuous-control PPO as usually set for Pendulum: discount 0.9 (the swing-up pays
within a few dozen steps), GAE lambda 0.95, 4,096 env steps per update (2 actors x 8
envs x 256 steps, fresh data: one chunk per actor per params version), 10 epochs of 32
minibatches, advantages normalised per batch, no entropy bonus, two hidden layers of
64 (tanh) for the policy and the value apiece. No observation or reward
normalisation. Its results: docs/learning.md, "Continuous control: Pendulum and
MuJoCo".
"""

from configs.bases import to_return


def get_config():
    config = to_return("ppo", "gymnax:Pendulum-v1", -200.0)
    config.agent.update(
        dict(
            hidden_sizes=(64, 64),
            discount=0.9,
            gae_lambda=0.95,
            learning_rate=1e-3,
            entropy_coef=0.0,
            num_epochs=10,
            num_minibatches=32,
            normalize_advantages=True,
        )
    )
    config.actor.update(dict(num_envs=8, unroll_length=256, chunks_per_version=1))
    config.learner.update(dict(batch_chunks=2, prefetch=0))
    config.replay.queue_size = 2
    return config
