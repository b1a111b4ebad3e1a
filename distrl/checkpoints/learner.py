"""The learner's checkpoints: where they live, the schedule that writes them, the
checks a resume makes, and config.checkpoint's fields and checks.

A checkpoint is a sealed pytree of kind `store.LEARNER` in
`<run_dir>/checkpoints/learner/` (`store`: npz + manifest, with the counter's
totals and the run's elapsed seconds); the newest `config.checkpoint.keep` are kept.
Each save by `Saver` may be followed, in the same round, by one of the replay
tables (`checkpoints.replay`).
"""

import os
import threading
import time
from collections.abc import Callable

import jax
from absl import logging

from distrl.checkpoints import store
from distrl.errors import check

FIELDS = {
    "checkpoint": dict(
        every_seconds=60.0,  # learner checkpoints; 0: only when the run ends
        replay=True,  # checkpoint Reverb's tables along with the learner
        keep=3,  # learner and replay checkpoints kept (resume falls back to older ones)
    )
}


def section_defaults(agent_config) -> dict:
    """The checkpoint section with its defaults (any agent's)."""
    return FIELDS


def check_section(experiment) -> None:
    """ConfigError unless config.checkpoint (how often, how many kept) can work."""
    section = experiment.config.checkpoint
    every, keep = section.every_seconds, section.keep
    check(every >= 0, f"config.checkpoint.every_seconds={every}; need >= 0 (0 = only at the end)")
    check(isinstance(keep, int) and keep >= 1, f"config.checkpoint.keep={keep}; need an int >= 1")


def directory(run_dir: str) -> str:
    """Where a run's learner checkpoints live."""
    return os.path.join(run_dir, "checkpoints", "learner")


def on_disk(run_dir: str) -> dict | None:
    """{file, version} of the learner's newest checkpoint (file relative to the run
    directory), or None when there is no readable one: for result.json."""
    ckpt_dir = directory(run_dir)
    try:
        manifest = store.read_manifest(ckpt_dir)
    except store.CheckpointError:
        return None
    file = os.path.join(ckpt_dir, manifest["state_file"])
    return dict(file=os.path.relpath(file, run_dir), version=manifest["version"])


def verify(run_dir: str, algorithm: str, agent) -> dict:
    """The manifest of the checkpoint a resume continues, after every check it makes:
    the newest that passes them (`manifest["skipped"]`: why each newer one did not).

    Runs in the launcher before any node starts: the learner's pytree comes from
    `jax.eval_shape(agent.init)`, so nothing is computed or compiled.
    """
    template = jax.eval_shape(agent.init, jax.random.PRNGKey(0))
    ckpt_dir = directory(run_dir)

    def check(manifest):
        store.check_compatible(manifest, algorithm, template, ckpt_dir)
        store.read_arrays(ckpt_dir, manifest)  # the checksum

    return store.newest_usable(ckpt_dir, check)[0]


class Saver:
    """The learner's checkpoint schedule: every `every_seconds` (0: only when asked).

    `replay_checkpoint(timeout_s, learner_checkpoint)` (optional) makes Reverb
    checkpoint its tables right after the learner's own checkpoint, in the same
    round (sealed with the learner checkpoint's state file,
    `checkpoints.replay`); its failure is logged, not raised, since the
    learner's checkpoint is what a resume needs (it then pairs with an older
    replay checkpoint, or an empty table).
    """

    def __init__(
        self,
        ckpt_dir: str,
        every_seconds: float,
        algorithm: str,
        replay_checkpoint: Callable[..., str | None] | None = None,
        keep: int = 3,
    ):
        self._dir = ckpt_dir
        self._keep = keep
        self._lock = threading.Lock()  # the loop and the final-checkpoint watchdog
        self._every = every_seconds
        self._algorithm = algorithm
        self._replay_checkpoint = replay_checkpoint
        self._last = time.time()

    def due(self) -> bool:
        return self._every > 0 and time.time() - self._last >= self._every

    def save(
        self,
        state,
        version: int,
        counts: dict,
        elapsed: float,
        replay_timeout_s: float | None = 10.0,
    ) -> str:
        """Checkpoints the learner state, then (if asked to, and `replay_timeout_s`
        is not None) the replay tables."""
        self._last = time.time()
        extra = dict(
            algorithm=self._algorithm, counts=_plain(counts), elapsed_seconds=float(elapsed)
        )
        with self._lock:
            path = store.save(self._dir, state, version, extra, self._keep)
        logging.info("learner: checkpoint of version %d written (%s)", version, path)
        if self._replay_checkpoint is not None and replay_timeout_s is not None:
            # Same round: the replay's items were acted with params no newer than these.
            state_file = os.path.basename(path)[: -len(".json")] + ".npz"
            self._replay_checkpoint(timeout_s=replay_timeout_s, learner_checkpoint=state_file)
        return path


def _plain(counts: dict) -> dict:
    return {k: float(v) for k, v in counts.items() if k != "counter_seconds"}
