"""How an algorithm's parts become its `base.Agent`: one helper for every `make_agent`.

Each algorithm computes its network, `init`, update function and acting functions;
`assemble` jits the update as `Agent.update`, scans K of it in one jitted call as
`Agent.update_many` (`scan_updates`: on an accelerator a small update is bound by its
dispatch, so the learner runs several per call), and merges the observation
statistics after each where the config keeps them (`observing`).
"""

from collections.abc import Callable

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from distrl import networks
from distrl.agents import base
from distrl.types import CoreChunk


def observing(update: Callable) -> Callable:
    """`update(state, batch)`, then the batch's observations merged into the network's
    running observation statistics (`networks.observe`): after the gradient steps, so
    that those saw the statistics the actors acted with.

    Only where those steps moved the params: a network that no longer learns (its step
    size decayed to 0) keeps the statistics it was trained with. Merged on, they would
    drift to the frozen policy's own states and change what it does (docs/decisions.md,
    "The reported policy is saved by the evaluator")."""

    def observed(state: base.TrainingState, batch):
        new, metrics = update(state, batch)
        steps = batch.chunk if isinstance(batch, CoreChunk) else batch
        learned = jnp.any(ravel_pytree(new.params)[0] != ravel_pytree(state.params)[0])
        merged = networks.observe(new.params, steps.observation)
        params = jax.tree.map(lambda m, p: jnp.where(learned, m, p), merged, new.params)
        return new._replace(params=params), metrics

    return observed


def scan_updates(update: Callable) -> Callable:
    """K applications of `update(state, batch[, weights]) -> (state, metrics)` in one
    `lax.scan`: (state, batches [K, ...], weights [K, N] | None) -> (state after the
    K-th, metrics [K, ...]), update k on batches[k] (and weights[k]) from the state
    update k - 1 left, as K calls in a row would."""

    def update_many(state: base.TrainingState, batches, weights=None):
        def step(state, inputs):
            batch, batch_weights = inputs
            if batch_weights is None:  # None is an empty pytree: scanned as is
                return update(state, batch)
            return update(state, batch, batch_weights)

        return jax.lax.scan(step, state, (batches, weights))

    return update_many


def assemble(
    config,
    network,
    init: Callable,
    update: Callable,
    acting: tuple,
    epsilon: Callable | None = None,
    valued: base.ValuedPolicy | None = None,
    core=None,
) -> base.Agent:
    """The `Agent` of the parts an algorithm's `make_agent` computes.

    update: `(state, batch[, weights]) -> (state, metrics)`, not jitted: the Agent's
      `update` is it jitted, its `update_many` K of it in one jitted scan; a config
      that normalizes observations (`normalize_observations`) has each followed by the
      statistics' merge (`observing`).
    acting: (policy, greedy, value) as `Agent` takes them; epsilon: the exploration
      schedule (None: `base.zero_epsilon`, the policy-gradient agents').
    """
    if getattr(config, "normalize_observations", False):
        update = observing(update)
    policy, greedy, value = acting
    return base.Agent(
        init=init,
        update=jax.jit(update),
        policy=policy,
        greedy=greedy,
        value=value,
        epsilon=base.zero_epsilon if epsilon is None else epsilon,
        network=network,
        config=config,
        valued=valued,
        core=core,
        update_many=jax.jit(scan_updates(update)),
    )
