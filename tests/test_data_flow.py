"""Data-flow settings: the on-policy version gate and the validation of its settings."""

import threading
import time

import pytest

from distrl import config as config_lib
from distrl.nodes.actor import _VersionGate
from distrl.nodes.variables import ParamsClient


class _Versions:
    """The learner's `wait_params` contract over a plain counter (as `Learner` holds it)."""

    def __init__(self):
        self.version = 0
        self._cond = threading.Condition()

    def publish(self):
        with self._cond:
            self.version += 1
            self._cond.notify_all()

    def get_params(self):
        return self.version, {"w": self.version}

    def wait_params(self, after_version, timeout_s):
        with self._cond:
            self._cond.wait_for(lambda: self.version > after_version, timeout_s)
        return self.get_params()


def _gated(num_actors, batch_chunks, per_version=1):
    c = config_lib.base_config("a2c")
    c.num_actors, c.learner.batch_chunks = num_actors, batch_chunks
    c.actor.chunks_per_version = per_version
    learner = _Versions()
    params = ParamsClient(learner)
    assert params.wait_first(lambda: False)
    return learner, params, _VersionGate(params, c, wait_s=0.05)


def test_gate_waits_until_the_round_is_used():
    """2 actors x 1 chunk per version, 1 chunk per update: a round is 2 updates, so an
    actor that acted with version v waits for v + 2 (its chunk is then at most 1 old)."""
    learner, params, gate = _gated(num_actors=2, batch_chunks=1)
    assert gate.wait(lambda: False) is False  # the first chunk acts at once, with v0
    done = []
    waiter = threading.Thread(target=lambda: done.append(gate.wait(lambda: False)))
    waiter.start()
    learner.publish()  # v1: not enough
    time.sleep(0.3)
    assert not done and params.version < 2
    learner.publish()  # v2: the round is used
    waiter.join(5)
    assert done == [True] and params.version == 2


def test_gate_off_never_waits():
    learner, params, gate = _gated(num_actors=2, batch_chunks=1, per_version=0)
    for _ in range(5):
        assert gate.wait(lambda: False) is False
    assert learner.version == 0


def test_gate_honours_a_stop():
    _, params, gate = _gated(num_actors=2, batch_chunks=2)
    gate.wait(lambda: False)
    start = time.time()
    assert gate.wait(lambda: time.time() - start > 0.2) is False
    assert time.time() - start < 5


@pytest.mark.parametrize(
    "field,value,message",
    [
        ("actor.chunks_per_version", 1, "chunks per version is less than one batch"),
        ("actor.chunks_per_version", -1, "config.actor.chunks_per_version=-1; need >= 0"),
        ("learner.prefetch", -1, "config.learner.prefetch=-1; need >= 0"),
        ("learner.max_in_flight", -2, "config.learner.max_in_flight=-2; need >= 0"),
        ("actor.episode_window", 1, "config.actor.episode_window=1; need >= 2"),
    ],
)
def test_bad_on_policy_settings_are_named(field, value, message):
    c = config_lib.base_config("reinforce")
    c.learner.batch_chunks = 4  # 4 chunks per update, 2 actors
    section, name = field.split(".")
    c[section][name] = value
    with pytest.raises(config_lib.ConfigError, match=message):
        config_lib.validate(c)


def test_bad_importance_exponent_is_named():
    c = config_lib.base_config("dqn")
    c.replay.importance_exponent = 1.5
    with pytest.raises(config_lib.ConfigError, match="importance_exponent=1.5; need 0..1"):
        config_lib.validate(c)
