"""The whole-episode pipeline (REINFORCE, GRPO): windows of chunks through a queue.

As `chunks`, but an item is the window of an actor's last W chunks, [W x T, B], with
`extras["owned"]` marking the steps of the whole episodes that end in its newest
chunk (`distrl.agents.episodes`): the critic-free agents need each episode's
outcome, which a fixed-length chunk cuts off. T defaults to 64, W to enough chunks
for the longest episode.
"""

import jax
import numpy as np

from distrl.agents import PipelineKind, episodes
from distrl.errors import check
from distrl.pipelines.base import zeros
from distrl.pipelines.chunks import Chunks


class Episodes(Chunks):
    kind = PipelineKind.EPISODES
    FIELDS = {
        "actor": dict(
            # chunks per written window; whole episodes of up to (W - 1) x T steps are
            # trained (distrl/agents/episodes.py); 0: enough for the longest episode,
            # ceil(time limit / T) + 1
            episode_window=0,
        ),
    }
    unroll_length = 64  # longer chunks: fewer windows per episode

    carries_core_state = False  # a window re-sends chunks: no one state starts it

    def validate(self, config, agent_config, env) -> None:
        super().validate(config, agent_config, env)
        w = config.actor.episode_window
        check(w == 0 or w >= 2, f"config.actor.episode_window={w}; need >= 2 chunks, or 0")

    def item_length(self, config, env) -> int:
        """Time steps in one item: W x T."""
        return episode_window(config, env) * config.actor.unroll_length

    def extras(self, num_envs: int, agent_config) -> dict:
        return {**super().extras(num_envs, agent_config), "owned": zeros((num_envs,), np.float32)}

    def item_fn(self, agent_config, config, env):
        """The window of the last W chunks with the steps it trains marked, the
        previous chunks carried over."""
        w = episode_window(config, env)

        @jax.jit
        def window(tail, chunk):
            previous = episodes.pad(chunk, w - 1) if tail is None else tail
            return episodes.window(previous, chunk)

        return window


def episode_window(config, env) -> int:
    """Chunks in a window: the config's, or derived so that the longest episode (the
    env's time limit) fits: ceil(limit / T) + 1."""
    if config.actor.episode_window:
        return int(config.actor.episode_window)
    return -(-env.spec.time_limit // config.actor.unroll_length) + 1
