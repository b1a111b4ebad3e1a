"""A2C on slippery 8x8: stops at 98% of the exact optimal success, confirmed.

Measured settings (benchmarks/README.md, "Slippery 8x8 against the exact optimum"):
the learning rate 2e-3 decays to 1e-5 over 12,000 updates (a constant 1e-3 found
the goal but swung between 0.8 and 0.0 success); discount 0.99 as the preset has.

Stable at a fixed budget as it is: with the target off and 4M env steps,
single-process, seeds 21-25, every evaluation of the second half at 97.9-100% of
the optimum and the final policy at 100% (benchmarks/README.md, "Issue 30: stable
learning at a fixed budget").
"""

from configs.bases import slippery_8x8_to_optimum


def get_config():
    config = slippery_8x8_to_optimum("a2c")
    config.agent.learning_rate = 2e-3
    config.agent.learning_rate_decay_steps = 12_000  # updates
    # The entropy bonus decays to 0.005 over the first 8,000 updates: at 0.05 throughout, a
    # distributed run settled at the start cell on LEFT instead of UP (exact success 0.864,
    # 97.1%, for the last 4M of 10M env steps), a near-tie the soft policy could not break.
    config.agent.entropy_decay_steps = 8_000  # updates
    config.agent.entropy_coef_final = 0.005
    # Chunks of [16, 16] as the single-process trainer's, one per update: the decay
    # counts updates, and [16, 64] chunks (4x fewer updates per env step) left a
    # distributed run at 97.9% after 6M env steps, the lr still at half.
    config.actor.num_envs = 16
    config.learner.batch_chunks = 1  # chunks of [T, B] per update
    config.replay.queue_size = 4
    return config
