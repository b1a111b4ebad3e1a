"""Recurrent cores (`agent.core="gru"`, issue 39): the state a policy carries.

Known answers for the state's reset at episode ends inside the rollout's scan; the
learner's unroll against the actor's step-by-step outputs; a chunk with its start
state through a real Reverb server; the single-process trainer learning a task that
needs memory; a program run whose saved policy launch/evaluate.py reads. The local_mp
runs (a restarted actor, a resumed run) are in test_recurrent_runs.py.
"""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import reverb
from conftest import (
    load_config,
)

from distrl import agents, local, networks, policy, replay, resources
from distrl import config as config_lib
from distrl import experiment as experiment_lib
from distrl.acting import evaluation, rollout
from distrl.agents import recurrent
from distrl.program import launcher as program
from distrl.types import CoreChunk

KEY = jax.random.PRNGKey(0)


def _memory_chain(length: int = 3, **agent):
    """configs/ppo_memory_chain.py with a memory of `length` steps (episodes of length
    + 1 steps) and a small core."""
    config = load_config("ppo_memory_chain")
    config.env.kwargs = json.dumps({"memory_length": length})
    config.agent.update({"core_size": 16, **agent})
    return config


def _counting_core(batch_size_of_state: int = 1) -> recurrent.Core:
    """A scripted core whose state counts the steps of the current episode; it acts 0
    and records the count it acted from."""

    def policy(params, key, obs, epsilon, state):
        (count,) = state
        actions = jnp.zeros(obs.shape[:1], jnp.int32)
        return actions, {"count": count[:, 0]}, (count + 1.0,)

    def greedy(params, obs, state):
        return policy(params, None, obs, 0.0, state)[::2]

    return recurrent.Core(lambda b: (jnp.zeros((b, batch_size_of_state)),), policy, greedy)


def test_the_state_resets_where_an_episode_ends_inside_the_scan():
    """Episodes of 4 steps (memory 3): the count each step acted from is its step in
    the episode, 0 1 2 3 0 1 ..., across rollouts too; each chunk stores the state its
    first step acted from, [1, B, ...]."""
    env = experiment_lib.Experiment(_memory_chain(3)).env
    core = _counting_core()
    run = rollout.make_rollout(env, core, 6)
    carry = rollout.init_carry(env, KEY, 2, core)
    counts, starts, last = [], [], []
    for i in range(2):
        carry, chunk, _ = run(None, carry, jax.random.PRNGKey(i), 0.0)
        assert isinstance(chunk, CoreChunk) and chunk.core_state[0].shape == (1, 2, 1)
        starts.append(np.asarray(chunk.core_state[0][0, :, 0]))
        counts.append(np.asarray(chunk.chunk.extras["count"]))
        last.append(np.asarray(chunk.chunk.last))
    np.testing.assert_array_equal(np.nonzero(np.concatenate(last)[:, 0])[0], [3, 7, 11])
    expected = np.tile(np.array([0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3])[:, None], (1, 2))
    np.testing.assert_array_equal(np.concatenate(counts), expected)
    np.testing.assert_array_equal(starts, [[0, 0], [2, 2]])  # the second chunk starts mid-episode
    np.testing.assert_array_equal(carry.core_state[0][:, 0], [0, 0])  # step 12 ended an episode


def test_a_feed_forward_rollout_carries_no_state_and_writes_plain_chunks():
    config = load_config("ppo")
    env = experiment_lib.Experiment(config).env
    agent = experiment_lib.Experiment(config).agent
    assert agent.core is None and rollout.policy_of(agent) is agent.policy
    carry = rollout.init_carry(env, KEY, 2, rollout.policy_of(agent))
    assert carry.core_state == ()
    _, chunk, _ = rollout.make_rollout(env, agent.policy, 4)(
        agent.init(KEY).params, carry, KEY, 0.0
    )
    assert type(chunk).__name__ == "Transition"


def _acted(config, num_envs: int = 3, steps: int = 9):
    """A recurrent agent, its params, and two consecutive chunks it acted."""
    env = experiment_lib.Experiment(config).env
    agent = experiment_lib.Experiment(config).agent
    params = agent.init(KEY).params
    run = rollout.make_rollout(env, rollout.policy_of(agent), steps)
    carry = rollout.init_carry(env, KEY, num_envs, rollout.policy_of(agent))
    chunks = []
    for i in range(2):
        carry, chunk, _ = run(params, carry, jax.random.PRNGKey(i + 1), 0.0)
        chunks.append(chunk)
    return agent, params, chunks


@pytest.mark.parametrize("shared_torso", [False, True])
def test_the_learners_unroll_matches_step_by_step_acting(shared_torso):
    """The learner's unroll from a chunk's stored start state, with resets where
    episodes end, gives the values and log-probs the actor recorded step by step (the
    second chunk: its start state is mid-episode, and an episode ends inside it)."""
    agent, params, chunks = _acted(_memory_chain(3, shared_torso=shared_torso, clip_value=True))
    chunk = chunks[1]
    assert np.asarray(chunk.chunk.last).any()
    assert float(jnp.abs(chunk.core_state[0]).max()) > 0  # not a fresh state
    start = jax.tree.map(lambda x: x[0], chunk.core_state)
    policy_out, value = recurrent.sequence_outputs(agent.network, params, chunk.chunk, start)
    np.testing.assert_allclose(value, chunk.chunk.extras["value"], rtol=1e-5, atol=1e-5)
    log_prob = agents.base.action_log_probs(policy_out, chunk.chunk.action)
    np.testing.assert_allclose(log_prob, chunk.chunk.extras["log_prob"], rtol=1e-5, atol=1e-5)
    # A fresh state instead of the stored one gives other outputs: the state matters.
    fresh = networks.core_state(16, shared_torso, 3)
    _, other = recurrent.sequence_outputs(agent.network, params, chunk.chunk, fresh)
    assert not np.allclose(other[0], value[0], atol=1e-6)


@pytest.mark.parametrize("shared_torso", [False, True])
def test_the_memory_estimate_counts_the_cores_parameters(shared_torso):
    """`resources.param_count` (what refuses a network too big for the machine) counts
    each torso's GRU and the heads on its output."""
    config = _memory_chain(10, shared_torso=shared_torso, core_size=24)
    agent, env = experiment_lib.Experiment(config).agent, experiment_lib.Experiment(config).env
    count = sum(x.size for x in jax.tree.leaves(agent.init(KEY).params))
    assert resources.param_count(agent.config, env.spec.observation_shape, 2) == count


@pytest.mark.parametrize("normalize", [False, True])
def test_the_recurrent_update_learns_on_whole_sequences(normalize):
    """PPO's recurrent update takes a CoreChunk [T, N] and moves the params; with
    normalize_observations it merges the chunk's observations into their statistics."""
    config = _memory_chain(3, num_minibatches=3, normalize_observations=normalize)
    agent, params, chunks = _acted(config)
    state = agent.init(KEY)
    new, metrics = agent.update(state, chunks[1])
    assert int(new.step) == 1 and all(np.isfinite(float(v)) for v in metrics.values())
    moved = jax.tree.leaves(jax.tree.map(lambda a, b: jnp.abs(a - b).max(), new.params, params))
    assert max(float(m) for m in moved) > 0
    if normalize:
        obs = np.asarray(chunks[1].chunk.observation)
        stats = new.params[networks.OBS_NORM]
        assert float(stats["count"]) == obs.shape[0] * obs.shape[1]
        np.testing.assert_allclose(stats["mean"], obs.mean((0, 1)), rtol=1e-5, atol=1e-6)


def test_a_chunk_and_its_start_state_travel_through_reverb():
    """An actor's CoreChunk items through a real Reverb server (the config's tables and
    signature), read back by the learner's dataset: the same start states, reshaped to
    [1, M x B, ...] beside the chunk's [T, M x B], and the agent's update takes them."""
    config = _memory_chain(3)
    config.actor.update(dict(num_envs=4, unroll_length=8))
    config.agent.num_minibatches = 2
    env = experiment_lib.Experiment(config).env
    pipeline = experiment_lib.Experiment(config).pipeline
    server = reverb.Server(pipeline.make_tables(config, env))
    try:
        client = reverb.Client(f"localhost:{server.port}")
        writer = replay.Writer(client, lambda: False)
        agent = experiment_lib.Experiment(config).agent
        state = agent.init(KEY)
        run = rollout.make_rollout(env, rollout.policy_of(agent), 8)
        carry = rollout.init_carry(env, KEY, 4, rollout.policy_of(agent))
        to_items, tail, written = pipeline.item_fn(agent.config, config, env), None, []
        for i in range(2):
            carry, chunk, _ = run(state.params, carry, jax.random.PRNGKey(i), 0.0)
            items, tail = to_items(tail, jax.device_get(chunk))
            pipeline.write(writer, items, version=3 + i)
            written.append(items)
        signature = pipeline.signature(config, env)
        taken = []
        for sample, _ in replay.iterate_batches(
            client.server_address, signature, pipeline.reading(config), lambda: len(taken) == 1
        ):
            taken.append(sample)
        writer.close()
    finally:
        server.stop()
    data = taken[0].data
    expected = pipeline.example_item(config, env)
    assert jax.tree.structure(data) == jax.tree.structure(expected)
    assert data.version.tolist() == [3, 4]
    batch = pipeline.learner_batch(data.data)
    assert batch.chunk.reward.shape == (8, 8) and batch.core_state[0].shape == (1, 8, 16)
    for got, want in zip(jax.tree.leaves(batch.core_state), zip(*[w.core_state for w in written])):
        np.testing.assert_array_equal(got, np.concatenate(want, axis=1))
    new, metrics = agent.update(state, batch)
    assert int(new.step) == 1 and np.isfinite(float(metrics["loss"]))


def _remembering_act() -> evaluation.StatefulAct:
    """A scripted recurrent policy for MemoryChain: its state keeps the context bit seen
    (observation element 2, +-1 while shown, 0 after) and it always answers it."""

    def act(params, key, obs, epsilon, state):
        (bit,) = state
        bit = jnp.where(obs[:, 2:3] != 0, obs[:, 2:3], bit)
        return (bit[:, 0] > 0).astype(jnp.int32), (bit,)

    return evaluation.StatefulAct(lambda b: (jnp.zeros((b, 1)),), act)


def test_the_evaluator_carries_the_state_through_each_episode():
    """A policy that answers MemoryChain from its state scores +1 in every episode only
    if the evaluator carries that state from the first step to the query; the evaluator
    of a recurrent agent acts through its core (a `StatefulAct`)."""
    env = experiment_lib.Experiment(_memory_chain(3)).env
    play = jax.jit(lambda key: evaluation.play_episodes(env, _remembering_act(), None, key, 64))
    episodes = play(KEY)
    np.testing.assert_array_equal(episodes.length, [4] * 64)
    np.testing.assert_array_equal(episodes.episode_return, [1.0] * 64)
    agent = experiment_lib.Experiment(_memory_chain(3)).agent
    assert isinstance(evaluation.make_act(agent), evaluation.StatefulAct)
    result = evaluation.make_evaluator(env, agent, 8)(agent.init(KEY).params, KEY)
    assert float(result.episodes) == 8 and float(result.mean_length) == 4.0


def test_local_recurrent_ppo_learns_memory_chain():
    """configs/ppo_memory_chain.py (memory 10) single-process: the greedy return's 95%
    lower bound over 1,000 episodes reaches 0.9 within 200k env steps (16k on seeds
    1, 41-43); the feed-forward preset stays at chance (docs/learning.md)."""
    config = load_config("ppo_memory_chain")
    config.budget.update(dict(env_steps=200_000, seconds=0.0))
    result = local.train(config)
    assert result.solved and result.return_low >= 0.9, result
    assert result.env_steps <= 200_000 + 2 * 16 * 128


@pytest.mark.parametrize("algorithm", ["a2c", "vtrace"])
def test_local_recurrent_a2c_and_vtrace_learn_memory_chain(algorithm):
    """A2C and V-trace take the same core on the same chunks (each sequence unrolled from
    its start state): MemoryChain of memory 10 to a lower bound of 0.9 (18k env steps
    for A2C on seed 1)."""
    config = config_lib.base_config(algorithm)
    config.env.update(dict(name="gymnax:MemoryChain-bsuite", kwargs='{"memory_length": 10}'))
    config.agent.update(dict(core="gru", core_size=32))
    config.evaluator.update(dict(target_return=0.9, confirm_envs=1000))
    config.budget.update(dict(env_steps=300_000, seconds=0.0))
    config.seed = 1
    result = local.train(config)
    assert result.solved and result.return_low >= 0.9, result


def test_recurrent_ppo_learns_in_a_program_and_its_policy_evaluates(run_dir, warm_python):
    """configs/ppo_memory_chain.py under test_mt (real Reverb and courier nodes): the
    evaluator confirms 0.9; launch/evaluate.py plays the saved policy through its core
    and scores it as the evaluator did."""
    config = load_config("ppo_memory_chain")
    config.run_dir = run_dir
    config.agent.core_size = 32
    config.budget.update(dict(env_steps=400_000, seconds=240.0))
    result, out_dir = program.run(config, "test_mt")
    assert result["stop_reason"] == "target_reached", result
    assert result["evaluation"]["return_low"] >= 0.9
    figures = warm_python.evaluated(out_dir, 200)
    assert figures["evaluation"]["episodes"] == 200
    assert figures["evaluation"]["return_low"] >= 0.9, figures
    # The saved policy steps with its state: 64 whole episodes, each answered right.
    loaded = policy.load_policy(out_dir)
    env, keys = loaded.env, jax.random.split(KEY, 64)
    env_state, timestep = jax.vmap(env.reset)(keys)
    core_state, total = loaded.initial_state(64), np.zeros(64)
    for _ in range(11):  # memory 10: episodes of 11 steps
        actions, core_state = loaded.step(timestep.observation, core_state)
        env_state, timestep = jax.vmap(env.step)(env_state, actions, keys)
        total += np.asarray(timestep.reward)
    assert np.asarray(timestep.last).all() and total.mean() >= 0.9, total
