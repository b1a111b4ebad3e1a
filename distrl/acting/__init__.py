"""Acting: how a policy meets its environments, in one place.

`rollout` (a jitted scan over B vmapped JAX envs), `host_rollout` (B envs stepped in
Python, one jitted policy call per step), `evaluation` (greedy or sampled episodes in
one jit, summarized) and `host_evaluation` (the same episodes on the host),
`intervals` (their figures' 95% intervals, the stop rule), `reporting` (value and
arrow grids, the text of a result), `exact_check` (the exact figures, the learned
value against the exact one). A new kind of action or policy core changes this
folder, the networks and the agents, nothing else.

Kept free of imports so that a module of it loads only what it needs.
"""
