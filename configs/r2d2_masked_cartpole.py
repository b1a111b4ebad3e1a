"""R2D2 on gymnax CartPole-v1 with the cart's and the pole's velocities hidden
(`env.hidden_observation`): a policy must infer them from the positions it has seen;
stops once the greedy mean return's 95% lower bound over 1,000 episodes reaches 475
(issue 39), as configs/ppo_masked_cartpole.py.

configs/r2d2_memory_chain.py's settings (sequences of 32 steps every 16, a burn-in of
8, 5-step double Q with value rescaling) with exploration decaying over 50k env steps;
a feed-forward policy balances about 43 steps here (docs/learning.md, "Memory tasks").
"""

from distrl.config import to_return


def get_config():
    config = to_return("r2d2", "gymnax:CartPole-v1", 475.0)
    config.env.hidden_observation = (1, 3)
    config.agent.update(
        dict(
            hidden_sizes=(64,),
            core_size=64,
            learning_rate=1e-3,
            burn_in=8,
            n_step=5,
            target_update_period=100,
            epsilon_decay_steps=50_000,
        )
    )
    config.actor.update(dict(num_envs=16, unroll_length=16))
    config.replay.update(
        dict(sequence_length=32, max_size=64_000, min_size=640, samples_per_insert=4.0)
    )
    config.learner.batch_sequences = 16
    return config
