"""What a run keeps on disk to resume from or to report, split by job.

Below the config (which calls `learner.validate`) and the replay package (whose
Reverb checkpointer, `distrl.replay.checkpoints`, keeps its checkpoints through
`replay`): imports jax, numpy, absl, `distrl.files` and `distrl.errors` only.
- `store`: sealed pytrees (npz + JSON manifest), written atomically, verified on load.
- `learner`: the learner's checkpoints: directory, schedule (`Saver`), resume checks.
- `policy`: the reported policy's params (`Keeper`); `distrl.policy` loads them to act.
- `replay`: Reverb's checkpoints kept (hard links), sealed and verified.
- `pairs`: which replay checkpoint a resume pairs with the learner's, or a restarted
  replay node loads.
"""

from distrl.checkpoints import learner, pairs, policy, replay, store  # noqa: F401
