"""distrl: a distributed actor-learner RL system in JAX."""
