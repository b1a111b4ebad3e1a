"""The learner's feed (`distrl.nodes.feed`): samples grouped per jitted call, each group's
batch stacked [K, ...] and put on the device by the feed's thread."""

import threading
import time
from types import SimpleNamespace

import jax
import numpy as np
import pytest

from distrl.nodes import feed


def _samples(n: int):
    """n replay-sample-shaped records: data.data a batch of 3 transitions, info a key."""
    for i in range(n):
        data = {"reward": np.full(3, float(i)), "obs": np.full((3, 2), i, np.int32)}
        yield SimpleNamespace(data=SimpleNamespace(data=data), info=i), 0.01


def _flat(data):
    return {k: v.reshape(-1, *v.shape[1:]) for k, v in data.items()}


def test_groups_of_k_are_stacked_in_order_and_a_partial_last_group_is_dropped():
    stream = feed.Feed(_samples(7), _flat, 3, lambda b: b, lambda: False)
    groups = list(stream)
    assert [[s.info for s in g.samples] for g in groups] == [[0, 1, 2], [3, 4, 5]]
    np.testing.assert_array_equal(groups[1].batch["reward"][:, 0], [3.0, 4.0, 5.0])
    assert groups[0].batch["obs"].shape == (3, 3, 2)  # [K, N, ...]


def test_one_update_per_call_keeps_the_batch_as_it_is():
    groups = list(feed.Feed(_samples(2), _flat, 1, lambda b: b, lambda: False))
    assert [g.batch["reward"].shape for g in groups] == [(3,), (3,)]


def test_the_put_runs_in_the_feed_thread_ahead_of_the_learner():
    threads = []

    def put(batch):
        threads.append(threading.current_thread().name)
        return jax.device_put(batch)

    stream = feed.Feed(_samples(3), _flat, 1, put, lambda: False)
    first = next(stream)
    deadline = time.time() + 10
    while len(threads) < 2 and time.time() < deadline:  # the next group, before it is asked
        time.sleep(0.01)
    assert threads[:2] == ["learner feed", "learner feed"]
    assert isinstance(first.batch["reward"], jax.Array)


def test_a_reader_error_reaches_the_learner():
    def broken():
        yield from _samples(1)
        raise RuntimeError("the replay went away")

    stream = feed.Feed(broken(), _flat, 1, lambda b: b, lambda: False)
    next(stream)
    with pytest.raises(RuntimeError, match="the replay went away"):
        next(stream)


def test_a_stopped_program_ends_the_feed_even_when_nobody_takes_its_groups():
    stop = threading.Event()
    stream = feed.Feed(_samples(100), _flat, 1, lambda b: b, stop.is_set)
    next(stream)
    stop.set()
    stream._thread.join(timeout=5)
    assert not stream._thread.is_alive()


def test_the_cpu_learner_copies_nothing():
    batch = {"x": np.ones(3)}
    assert feed.device_put_for("cpu")(batch) is batch
    assert feed.device_put_for("tpu") is jax.device_put


def test_a_queue_feed_reads_nothing_before_the_learner_asks():
    read = []

    def reader():
        for sample in _samples(3):
            read.append(sample[0].info)
            yield sample

    stream = feed.Feed(reader(), _flat, 1, lambda b: b, lambda: False, ahead=False)
    time.sleep(0.2)
    assert read == []
    assert next(stream).samples[0].info == 0
    time.sleep(0.2)
    assert read == [0]


def test_a_stop_while_a_group_waits_ends_the_feed_after_it_without_a_hang():
    """The thread cannot leave its last word (None) behind a group nobody took: the
    learner still gets that group, then the end, not a wait forever."""
    stop = threading.Event()
    stream = feed.Feed(_samples(100), _flat, 1, lambda b: b, stop.is_set)
    deadline = time.time() + 5
    while stream._ready.empty() and time.time() < deadline:
        time.sleep(0.01)
    stop.set()
    stream._thread.join(timeout=5)
    taken = list(stream)  # returns: a group or two, then StopIteration
    assert 1 <= len(taken) <= 2
