"""Reverb signatures: what actors write is exactly what the learner's dataset yields.

For every algorithm preset: a real Reverb server with the config's tables, an actor's
rollout written through `replay.Writer`, read back through the learner's prefetching
dataset, reshaped, and fed to the agent's jitted update.
"""

import jax
import numpy as np
import pytest
import reverb

from distrl import agents, replay, rollout
from distrl import config as config_lib
from distrl.nodes.actor import make_item_fn

ALGORITHMS = sorted(agents.PRESETS)


def _small_config(algorithm: str):
    c = config_lib.base_config(algorithm)
    c.actor.num_envs = 8
    c.actor.unroll_length = 4
    is_replay = config_lib.is_replay(config_lib.make_agent_config(c))
    c.learner.batch_size, c.learner.batch_chunks = 16, 2  # 2 items either way
    c.replay.min_size = 16  # transitions: 2 items of 8
    c.replay.samples_per_insert = 1.0
    if "ppo" in algorithm or "grpo" in algorithm:
        c.agent.num_minibatches = 2
    return c


@pytest.fixture
def server_for():
    servers = []

    def start(config, obs_size):
        server = reverb.Server(replay.make_tables(config, obs_size))
        servers.append(server)
        return reverb.Client(f"localhost:{server.port}")

    yield start
    for server in servers:
        server.stop()


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_actor_items_match_learner_batches(algorithm, server_for):
    c = _small_config(algorithm)
    env = config_lib.make_env(c)
    agent_config = config_lib.make_agent_config(c)
    agent = agents.make_agent(agent_config, env)
    client = server_for(c, env.obs_size)
    state = agent.init(jax.random.PRNGKey(0))
    unroll = rollout.make_rollout(env, agent.policy, c.actor.unroll_length)
    carry = rollout.init_carry(env, jax.random.PRNGKey(1), c.actor.num_envs)
    is_replay = config_lib.is_replay(agent_config)
    writer = replay.Writer(client, lambda: False)
    write = writer.write_steps if is_replay else writer.write_chunk
    to_items, tail = make_item_fn(agent_config), None
    for i in range(2):
        carry, chunk, _ = unroll(state.params, carry, jax.random.PRNGKey(i), 0.5)
        items, tail = to_items(tail, chunk)
        write(jax.device_get(items))
    expected = replay.example_item(c, env.obs_size)
    size = client.server_info()[replay.TABLE].current_size
    assert size == (2 * c.actor.unroll_length - agent_config.n_step + 1 if is_replay else 2)

    taken = []
    for sample, _ in replay.iterate_batches(
        client.server_address, c, env.obs_size, should_stop=lambda: len(taken) == 1
    ):
        taken.append(sample)
    data = taken[0].data
    assert jax.tree.structure(data) == jax.tree.structure(expected)
    k = config_lib.items_per_batch(c)
    for got, want in zip(jax.tree.leaves(data), jax.tree.leaves(expected)):
        assert got.shape == (k,) + want.shape and got.dtype == want.dtype

    batch = replay.to_learner_batch(data, is_replay)
    n, t = c.actor.num_envs, c.actor.unroll_length
    assert batch.action.shape == ((k * n,) if is_replay else (t, k * n))
    new_state, metrics = agent.update(state, batch)
    assert int(new_state.step) == 1
    assert all(np.isfinite(float(v)) for v in metrics.values())
    writer.close()


def test_queue_chunks_keep_time_order_per_env(server_for):
    """[M, T, B] -> [T, M*B]: column j is one env's T consecutive steps."""
    data = np.arange(2 * 3 * 4).reshape(2, 3, 4)  # [M=2, T=3, B=4]
    out = replay.to_learner_batch({"x": data}, replay=False)["x"]
    assert out.shape == (3, 8)
    np.testing.assert_array_equal(out[:, 5], data[1, :, 1])


def test_wait_for_server_retries_then_honours_stop(caplog):
    client = reverb.Client("localhost:1")  # nothing listens on port 1
    calls = []

    def should_stop():
        calls.append(1)
        return len(calls) > 2

    with caplog.at_level("WARNING"):
        assert replay.wait_for_server(client, should_stop, max_backoff_s=0.1) is False
    assert "unreachable" in caplog.text and "retrying" in caplog.text
