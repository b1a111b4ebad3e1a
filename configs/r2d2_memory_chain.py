"""R2D2 on gymnax MemoryChain-bsuite with a memory of 10 steps (episodes of 11): the
context bit is seen at the first step only and asked for at the last, so only a policy
with memory scores above chance (0); stops once the greedy mean return's 95% lower
bound over 1,000 episodes reaches 0.9, as configs/ppo_memory_chain.py.

Sequences of 32 steps start every 16 (`actor.unroll_length`, the period: R2D2's
overlap of half a sequence), so each one holds at least one whole episode after its
burn-in of 8 steps, and the GRU learns to keep the bit across it (a stored state alone
carries only what the network already keeps; docs/decisions.md, "R2D2's sequences
start where the actor's chunks start"). What it reaches: docs/results.md,
"`r2d2_memory_chain`".
"""

from configs.bases import to_return


def get_config():
    config = to_return("r2d2", "gymnax:MemoryChain-bsuite", 0.9)
    config.env.kwargs = '{"memory_length": 10}'
    config.agent.update(
        dict(
            hidden_sizes=(64,),
            core_size=64,
            learning_rate=1e-3,
            burn_in=8,
            n_step=5,
            target_update_period=100,
            epsilon_decay_steps=20_000,
        )
    )
    config.actor.update(dict(num_envs=16, unroll_length=16))
    config.replay.update(
        dict(sequence_length=32, max_size=64_000, min_size=640, samples_per_insert=4.0)
    )
    config.learner.batch_sequences = 16
    return config
