"""What a run writes about itself in its run directory, for people and tools.

- `rundir`: the directory's layout, config.json, its lock, fresh-run and resume checks.
- `results`: result.json (the evaluator writes it, the launcher completes it), the summary.
- `failures`: failures/<node>.txt, a failing node's cause and traceback, by name.
Above the config (rundir reads and checks config.json); the checkpoints a run keeps
are `distrl.checkpoints`, its metric rows `distrl.metrics`.
"""
