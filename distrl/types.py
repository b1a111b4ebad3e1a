"""Shared pytrees of the data flow: what actors record and what learners consume.

`Transition` is one environment step as an actor records it (stacked to [T, B] by a
rollout); `QTransition` is an n-step DQN sample built from those (see
`distrl.agents.nstep`). Both are NamedTuples so they cross `jit`, processes and
Reverb as plain pytrees.
"""

from typing import Any, NamedTuple

Array = Any  # jax.Array or np.ndarray; kept loose so numpy batches from Reverb fit.


class Transition(NamedTuple):
    """One env step; every field gains leading [T, B] dims in a rollout.

    observation: [O] float32, what the policy acted on.
    action: [] int32.
    reward: [] float32.
    discount: [] float32, the env discount: 0 on termination (H or G), else 1.
    last: [] bool, the episode ended here (terminated or truncated).
    next_observation: [O] float32, the cell reached, before any auto-reset.
    extras: policy extras, {'log_prob': []} for AC/PPO (and 'value' [] with PPO's
      clip_value, `agents.base.records_value`), {} for DQN.
    """

    observation: Array
    action: Array
    reward: Array
    discount: Array
    last: Array
    next_observation: Array
    extras: dict[str, Array]


class QTransition(NamedTuple):
    """An n-step DQN sample; fields gain a leading [N] dim in a batch.

    observation: [O] float32, s_tm1.
    action: [] int32, a_tm1.
    reward: [] float32, the n-step discounted reward sum r_t.
    discount: [] float32, the bootstrap multiplier gamma**k * env discount
      (0 when the window ends in a termination); the loss uses it as is.
    next_observation: [O] float32, s_t to bootstrap from (pre-reset on truncation).
    """

    observation: Array
    action: Array
    reward: Array
    discount: Array
    next_observation: Array


class CoreChunk(NamedTuple):
    """A recurrent policy's chunk: what the learner unrolls its core over.

    chunk: `Transition` [T, B].
    core_state: the core's state at the chunk's first step (`networks.core_state`'s
      tuple), each leaf [1, B, ...]: a time axis of one, so every leaf is time-major
      and B splits the same way in every pipeline step.
    """

    chunk: Any
    core_state: Any


class Versioned(NamedTuple):
    """One Reverb item: what the actor wrote and the params version it acted with.

    data: a `QTransition` [k, B] (replay: k = `replay.item_steps` consecutive time
      steps of B envs; [B] at k = 1) or a `Transition` [T, B] chunk (queue).
    version: [] int32, the learner version of the behaviour policy's params (the
      version the actor's `ParamsClient` held when the rollout was dispatched). The
      learner's data age of an item is its own version minus this one.
    Both gain a leading [K] dim when written K at a time or sampled in a batch.
    """

    data: Any
    version: Array
