"""The reported policy's params on disk: a sealed pytree of its own kind (`POLICY`),
saved by the evaluator each time the policy it would report changes (`Keeper`).

result.json reports one policy (`param_version`): the params the evaluator
confirmed at the target, the confirmed best kept when a budget ended the run
(`evaluator.keep_best`), else the last evaluated. The learner's checkpoints hold
its newest state instead, often another, worse policy. So the evaluator writes
the reported policy's params to `<run_dir>/checkpoints/policy/` each time the
policy it would report changes: a killed run keeps the one it would have
reported. The files are `checkpoints.store`'s (npz + sealed manifest, atomic, the
npz's SHA-256 checked on load); only the newest is kept. `distrl.policy.load_policy`
reads them back to act.
"""

import os

import jax
from absl import logging

from distrl.checkpoints import store

POLICY = store.Kind("distrl-policy/1", "params", "policy")


def directory(run_dir: str) -> str:
    """Where a run's reported policy lives."""
    return os.path.join(run_dir, "checkpoints", "policy")


class Keeper:
    """The evaluator's writer of the reported policy.

    `offer(params, version, evaluation)` saves those params unless their version is
    the one on disk already (a report that keeps its policy writes nothing). During
    the run the files are written without fsync, far quicker (an evaluation may change
    the report each time); the final report's (`final=True`) are made durable. A
    failed write is logged, not raised: the run goes on, and `on_disk` still names the
    file that holds the policy.
    """

    def __init__(self, run_dir: str, algorithm: str):
        self._run_dir = run_dir
        self._algorithm = algorithm
        self._version = None
        self._durable = False
        self._manifest = None

    def offer(self, params, version: int, evaluation: dict | None = None, final=False) -> None:
        if version == self._version and (self._durable or not final):
            return
        if evaluation is not None:  # the evaluation of these params, for people
            evaluation = {k: float(v) for k, v in evaluation.items()}
        extra = dict(algorithm=self._algorithm, evaluation=evaluation)
        try:
            self._manifest = store.save(
                directory(self._run_dir), params, version, extra, 1, POLICY, durable=final
            )
        except OSError as err:
            logging.warning("evaluator: the policy of version %d was not saved: %s", version, err)
            return
        self._version, self._durable = version, final

    def restore(self, template):
        """(evaluation, params, version) of the policy an earlier launch of this run
        saved (a restarted evaluator, a resumed run), or None if there is none, or it
        does not fit `template` (the params' shapes). A restarted evaluator compares
        its new evaluations with it, so a worse policy never replaces the kept one."""
        ckpt_dir = directory(self._run_dir)
        if not os.path.isdir(ckpt_dir):
            return None
        try:
            manifest, leaves = store.read_newest(ckpt_dir, POLICY)
            store.check_compatible(manifest, self._algorithm, template, ckpt_dir)
        except store.CheckpointError as err:
            logging.warning("evaluator: the saved policy is not kept: %s", err)
            return None
        params = jax.tree.unflatten(jax.tree.structure(template), leaves)
        self._version, self._durable = int(manifest["version"]), False
        self._manifest = os.path.join(ckpt_dir, manifest["state_file"][: -len(".npz")] + ".json")
        return manifest.get("evaluation"), params, self._version

    def on_disk(self) -> dict | None:
        """{file, version} of the saved policy (file relative to the run directory)."""
        if self._manifest is None:
            return None
        state_file = self._manifest[: -len(".json")] + ".npz"
        return dict(file=os.path.relpath(state_file, self._run_dir), version=self._version)
