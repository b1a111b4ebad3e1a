"""Nodes stepped by the test: the real program under test_mt (Reverb, courier), with the
learner's, actors' and evaluator's loops disabled; the test dereferences the nodes and
calls `Actor.step()` (one rollout written to replay) and `Learner.step()` (one update),
the same steps their loops run."""

import math
import time

import launchpad as lp
import numpy as np
import pytest
import reverb
from conftest import load_config

from distrl import experiment as experiment_lib
from distrl import metrics, replay
from distrl.nodes import lifecycle
from distrl.nodes.actor import Actor
from distrl.program import topology

T, B = 16, 64  # the configs' chunk length and envs per actor
_RESULT_S = 120.0  # generous: a first step compiles, and the machine may be loaded


class _Cleanups:
    """The `test_case` Launchpad's test_mt launcher registers its cleanup with."""

    def __init__(self):
        self._calls = []

    def addCleanup(self, fn, *args):  # noqa: N802 - unittest's name
        self._calls.append((fn, args))

    def run(self):
        for fn, args in reversed(self._calls):
            fn(*args)


@pytest.fixture
def stepped(tmp_path):
    """launch(config) -> {group: [dereferenced nodes]} of the program, stepped by the test."""
    cleanups = _Cleanups()

    def launch(config):
        config.run_dir = str(tmp_path / "run")
        program = topology.make_program(experiment_lib.make(config), config.run_dir, time.time())
        for group in ("learner", "actor", "evaluator"):
            for node in program.groups[group]:
                node.disable_run()
        lp.launch(program, launch_type="test_mt", test_case=cleanups, serialize_py_nodes=False)
        return {
            group: [node.create_handle().dereference() for node in nodes]
            for group, nodes in program.groups.items()
        }

    yield launch
    cleanups.run()


def _finite(result: dict) -> bool:
    return all(math.isfinite(v) for v in result.values())


@pytest.mark.timeout(300)
def test_stepped_dqn_actors_feed_the_learner_and_its_priorities(stepped):
    config = load_config("dqn")
    config.replay.sampler = "prioritized"
    # Inserts may run ahead of samples by the rate limiter's error buffer only: at 4
    # samples per insert a stepped actor's third chunk would wait for 48 more updates.
    config.replay.samples_per_insert = 1.0
    config.agent.update(dict(epsilon_init=0.5, epsilon_final=0.5))
    config.actor.epsilon_spread = 2.0  # actor 1: 0.5 ** 3
    per_rollout = T // config.replay.item_steps  # items of k time steps
    nodes = stepped(config)
    learner, actors = nodes["learner"][0], nodes["actor"]
    update = learner.futures.step()  # waits for the replay's min_size (640 transitions)
    first = actors[0].step()
    assert first == dict(env_steps=T * B, items_written=per_rollout, param_version=0)
    assert actors[1].step()["items_written"] == per_rollout
    result = update.result(timeout=_RESULT_S)
    assert result["version"] == 1 and _finite(result) and result["loss"] > 0
    for _ in range(3):
        assert actors[0].step()["items_written"] == per_rollout
        assert learner.step()["version"] > 1
    assert learner.get_params()[0] == 4  # updates applied

    # The learner's |TD| priorities reach the table (written by a background thread).
    deadline = time.time() + 30
    while learner.max_priority() == 1.0 and time.time() < deadline:
        time.sleep(0.1)
    assert learner.max_priority() != 1.0
    info = nodes["replay"][0].server_info()[replay.TABLE]
    assert info.current_size == 5 * per_rollout

    # Each actor's exploration rate: eps ** (1 + spread * i / (N - 1)), in its CSV.
    for i, want in enumerate((0.5, 0.125)):
        rows = metrics.read_csv(metrics.csv_path(config.run_dir, f"actor_{i}"))
        np.testing.assert_allclose(rows["epsilon"], want, rtol=1e-6)


@pytest.mark.timeout(300)
def test_a_learner_of_k_updates_per_call_applies_k_and_sends_their_priorities(stepped):
    """learner.updates_per_call=4: one step is one jitted call of 4 updates on 4 sampled
    batches (`Agent.update_many`); the version counts updates, and the priorities of all
    4 batches reach the table."""
    config = load_config("dqn")
    config.replay.sampler = "prioritized"
    config.replay.samples_per_insert = 8.0  # 4 batches of 128 per call on 2 rollouts
    config.learner.updates_per_call = 4
    nodes = stepped(config)
    learner, actors = nodes["learner"][0], nodes["actor"]
    update = learner.futures.step()
    for actor in actors:
        actor.step()
    result = update.result(timeout=_RESULT_S)
    assert result["version"] == 4 and _finite(result) and result["loss"] > 0
    assert learner.step()["version"] == 8
    assert learner.get_params()[0] == 8
    deadline = time.time() + 30
    while learner.max_priority() == 1.0 and time.time() < deadline:
        time.sleep(0.1)
    assert learner.max_priority() != 1.0


@pytest.mark.timeout(300)
def test_stepped_on_policy_actor_waits_for_the_learner(stepped):
    """PPO's gate (one chunk per params version): an actor's next chunk waits until the
    learner has used the round, and every batch was acted with the params it updates."""
    nodes = stepped(load_config("ppo"))
    learner, actors = nodes["learner"][0], nodes["actor"]
    update = learner.futures.step()
    for actor in actors:
        assert actor.step() == dict(env_steps=T * B, items_written=1, param_version=0)
    first = update.result(timeout=_RESULT_S)
    assert first["version"] == 1 and _finite(first)
    assert actors[0].step()["param_version"] == 1  # a new round: no wait
    held = actors[0].futures.step()  # the round of version 1 is not used yet
    time.sleep(1.0)
    assert not held.done()
    assert actors[1].step()["param_version"] == 1
    assert learner.step()["version"] == 2
    assert held.result(timeout=_RESULT_S)["param_version"] == 2


@pytest.mark.timeout(300)
def test_a_restarted_recurrent_actor_starts_from_the_initial_state(stepped):
    """Recurrent PPO (MemoryChain of memory 5: episodes of 6 steps, chunks of 8): actor 0
    acts a chunk the learner learns from, then a second one that starts mid-episode;
    then the node is restarted as the supervisor restarts it (its process gone, a fresh
    `Actor` of the same arguments, attempt 1). The restarted actor's first chunk,
    read from the real queue, stores the core's initial state; its second a carried
    state, mid-episode again."""
    config = load_config("ppo_memory_chain")
    config.env.kwargs = '{"memory_length": 5}'
    config.agent.update(dict(core_size=8, hidden_sizes=(16,), num_minibatches=2))
    config.actor.update(dict(num_envs=4, unroll_length=8, chunks_per_version=0))
    config.num_actors = 1
    config.learner.batch_chunks = 1
    config.replay.queue_size = 4  # every chunk fits until the test reads them
    nodes = stepped(config)
    replay_client, learner, counter = nodes["replay"][0], nodes["learner"][0], nodes["counter"][0]
    update = learner.futures.step()  # publishes version 0, then learns from the first chunk
    assert nodes["actor"][0].step()["items_written"] == 1
    assert update.result(timeout=_RESULT_S)["version"] == 1
    assert nodes["actor"][0].step()["items_written"] == 1
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(lifecycle.ATTEMPT_ENV, "1")
        restarted = Actor(
            experiment_lib.Experiment(config),
            0,
            reverb.Client(replay_client.server_address),
            learner,
            counter,
            config.run_dir,
        )
        for steps in (32, 64):  # its own count from 0: [8, 4] chunks
            assert restarted.step() == dict(env_steps=steps, items_written=1, param_version=1)
    # The learner's dataset may hold the second chunk in flight (one sample ahead): the
    # restarted actor's two chunks are the queue's last two, whatever it holds.
    time.sleep(1.0)
    held = replay_client.server_info(timeout=5)[replay.TABLE].current_size
    assert held in (2, 3), held
    env = experiment_lib.Experiment(config).env
    pipeline = experiment_lib.Experiment(config).pipeline
    read = replay.iterate_batches(
        replay_client.server_address,
        pipeline.signature(config, env),
        pipeline.reading(config),
        lambda: False,
    )
    samples = [next(read)[0].data for _ in range(held)]
    initial = experiment_lib.Experiment(config).agent.core.initial_state(4)
    first, second = samples[-2:]
    assert first.version.tolist() == second.version.tolist() == [1]
    for sample, fresh in ((first, True), (second, False)):
        chunk = pipeline.learner_batch(sample.data)
        for stored, want in zip(chunk.core_state, initial):
            assert stored.shape == (1, *want.shape)
            assert np.array_equal(stored[0], want) == fresh, stored
        ends = np.flatnonzero(np.asarray(chunk.chunk.last)[:, 0])
        assert ends.tolist() == ([5] if fresh else [3])  # the second starts at step 2 of 6
