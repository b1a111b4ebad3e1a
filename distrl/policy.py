"""The policy a run reports, on disk: its params, sealed, and loaded back to act.

result.json reports one policy (`param_version`): the params the evaluator
confirmed at the target, the confirmed best kept when a budget ended the run
(`evaluator.keep_best`), else the last evaluated. The learner's checkpoints hold
its newest state instead, often another, worse policy. So the evaluator writes
the reported policy's params to `<run_dir>/checkpoints/policy/` each time the
policy it would report changes (`Keeper`): a killed run keeps the one it would
have reported. The files are `distrl.checkpoint`'s (npz + sealed manifest, atomic,
the npz's SHA-256 checked on load), of kind `POLICY`; only the newest is kept.

`load_policy(run_dir)` reads it back with the run's config.json, or the learner's
newest checkpoint (`which="latest"`): a `Policy`, whose `act` is the greedy policy.
"""

import os
from typing import Any, NamedTuple

import jax
from absl import logging

from distrl import agents, checkpoint, envs, rundir
from distrl import config as config_lib
from distrl import experiment as experiment_lib

POLICY = checkpoint.Kind("distrl-policy/1", "params", "policy")
REPORTED, LATEST = "reported", "latest"  # which params `load_policy` reads


def directory(run_dir: str) -> str:
    """Where a run's reported policy lives."""
    return os.path.join(run_dir, "checkpoints", "policy")


class Keeper:
    """The evaluator's writer of the reported policy.

    `offer(params, version, evaluation)` saves those params unless their version is
    the one on disk already (a report that keeps its policy writes nothing). During
    the run the files are written without fsync, about 2 ms for a few kB of params
    instead of 30 (an evaluation may change the report each time); the final
    report's (`final=True`) are made durable. A failed write is logged, not raised:
    the run goes on, and `on_disk` still names the file that holds the policy.
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
            self._manifest = checkpoint.save(
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
            manifest, leaves = checkpoint.read_newest(ckpt_dir, POLICY)
            checkpoint.check_compatible(manifest, self._algorithm, template, ckpt_dir)
        except checkpoint.CheckpointError as err:
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


class Policy(NamedTuple):
    """A run's policy, loaded: everything needed to act and to score it."""

    run_dir: str
    experiment: experiment_lib.Experiment  # the run's, from its config.json
    params: Any
    version: int  # the learner's parameter version
    file: str  # the npz the params came from
    which: str  # REPORTED, LATEST or a param version's digits

    @property
    def config(self):
        """The run's config (ml_collections.ConfigDict)."""
        return self.experiment.config

    @property
    def env(self) -> envs.Environment:
        return self.experiment.env

    @property
    def agent(self) -> agents.Agent:
        return self.experiment.agent

    def act(self, observations):
        """Greedy actions [B] int32 for observations [B, *obs_shape] (the env's spec); a
        recurrent policy's from a fresh episode's state (`step` carries it)."""
        return _greedy(self.agent, self.params, observations)

    def initial_state(self, batch_size: int):
        """A recurrent policy's state for `batch_size` fresh episodes; () without a core."""
        core = self.agent.core
        return () if core is None else core.initial_state(batch_size)

    def step(self, observations, state=()):
        """(greedy actions [B], next state): a recurrent policy acts from `state` (start
        each episode from `initial_state`'s entry); a feed-forward one ignores it."""
        if self.agent.core is None:
            return self.act(observations), state
        return _greedy_step(self.agent, self.params, observations, state)


_greedy = jax.jit(lambda agent, params, obs: agent.greedy(params, obs), static_argnums=0)
_greedy_step = jax.jit(
    lambda agent, params, obs, state: agent.core.greedy(params, obs, state), static_argnums=0
)


def load_policy(run_dir: str, which: str = REPORTED) -> Policy:
    """The run's reported policy (`which=REPORTED`), the learner's newest checkpoint's
    params (`LATEST`) or those of its kept checkpoint of a param version (`which` its
    digits, "1200"), checked against the run's config.

    No fall back to an older file: a CheckpointError (a ConfigError) names the run
    directory or the file that is missing, corrupt or of another shape.
    """
    if which not in (REPORTED, LATEST) and not which.isdigit():
        raise config_lib.ConfigError(
            f"which={which!r}: valid: {REPORTED}, {LATEST}, or a param version (digits)"
        )
    config_path = os.path.join(run_dir, rundir.CONFIG_FILE)
    if not os.path.isdir(run_dir):
        raise checkpoint.CheckpointError(f"run directory {run_dir} does not exist")
    if not os.path.isfile(config_path):
        message = f"{run_dir} is not a run directory (no {rundir.CONFIG_FILE})"
        raise checkpoint.CheckpointError(message)
    config = config_lib.load_json(config_path)
    if which == REPORTED:
        ckpt_dir, kind = directory(run_dir), POLICY
        if not os.path.isdir(ckpt_dir):
            raise checkpoint.CheckpointError(
                f"{run_dir} holds no saved policy ({ckpt_dir} does not exist: a run from "
                f"before policies were saved, or killed before its first evaluation); the "
                f"learner's last checkpoint loads with which={LATEST!r} (--checkpoint={LATEST})"
            )
    else:
        ckpt_dir, kind = checkpoint.directory(run_dir), checkpoint.LEARNER
    # The files are checked first, so a bad one is named before JAX starts a backend.
    if which.isdigit():
        manifest, leaves = checkpoint.read_version(ckpt_dir, int(which), kind)
    else:
        manifest, leaves = checkpoint.read_newest(ckpt_dir, kind)
    experiment = experiment_lib.Experiment(config)
    template = jax.eval_shape(experiment.agent.init, jax.random.PRNGKey(0))
    template = template.params if which == REPORTED else template
    checkpoint.check_compatible(manifest, config.algorithm, template, ckpt_dir)
    tree = jax.tree.unflatten(jax.tree.structure(template), leaves)
    params = tree if which == REPORTED else tree.params
    file = os.path.join(ckpt_dir, manifest["state_file"])
    return Policy(run_dir, experiment, params, int(manifest["version"]), file, which)
