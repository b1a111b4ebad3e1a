"""A run's policy loaded back to act: the one it reports, or a learner checkpoint's.

The evaluator keeps the params of the policy result.json reports in
`<run_dir>/checkpoints/policy/` (`checkpoints.policy`). `load_policy(run_dir)` reads
them back with the run's config.json, or the learner's newest checkpoint
(`which="latest"`): a `Policy`, whose `act` is the greedy policy. It builds the
run's env and agent from its config, so it sits above `config` and cannot live in
`checkpoints`, which the config imports.
"""

import os
from typing import Any, NamedTuple

import jax

from distrl import agents, checkpoints, envs
from distrl import config as config_lib
from distrl import experiment as experiment_lib
from distrl.records import rundir

REPORTED, LATEST = "reported", "latest"  # which params `load_policy` reads


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
        raise checkpoints.store.CheckpointError(f"run directory {run_dir} does not exist")
    if not os.path.isfile(config_path):
        message = f"{run_dir} is not a run directory (no {rundir.CONFIG_FILE})"
        raise checkpoints.store.CheckpointError(message)
    config = config_lib.load_json(config_path)
    if which == REPORTED:
        ckpt_dir, kind = checkpoints.policy.directory(run_dir), checkpoints.policy.POLICY
        if not os.path.isdir(ckpt_dir):
            raise checkpoints.store.CheckpointError(
                f"{run_dir} holds no saved policy ({ckpt_dir} does not exist: a run from "
                f"before policies were saved, or killed before its first evaluation); the "
                f"learner's last checkpoint loads with which={LATEST!r} (--checkpoint={LATEST})"
            )
    else:
        ckpt_dir, kind = checkpoints.learner.directory(run_dir), checkpoints.store.LEARNER
    # The files are checked first, so a bad one is named before JAX starts a backend.
    if which.isdigit():
        manifest, leaves = checkpoints.store.read_version(ckpt_dir, int(which), kind)
    else:
        manifest, leaves = checkpoints.store.read_newest(ckpt_dir, kind)
    experiment = experiment_lib.Experiment(config)
    template = jax.eval_shape(experiment.agent.init, jax.random.PRNGKey(0))
    template = template.params if which == REPORTED else template
    checkpoints.store.check_compatible(manifest, config.algorithm, template, ckpt_dir)
    tree = jax.tree.unflatten(jax.tree.structure(template), leaves)
    params = tree if which == REPORTED else tree.params
    file = os.path.join(ckpt_dir, manifest["state_file"])
    return Policy(run_dir, experiment, params, int(manifest["version"]), file, which)
