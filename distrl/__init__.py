"""distrl: a distributed actor-learner RL system (Reverb + Launchpad + JAX).

Importing the package has no side effects; the entry points turn on JAX's
compilation cache (`distrl.compile_cache`).
"""
