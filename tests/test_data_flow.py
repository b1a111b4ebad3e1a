"""Data-flow settings: params pulled by `ParamsClient` from a fake source, per-actor
exploration (`epsilon_spread`), the on-policy version gate and the validation of its
settings."""

import concurrent.futures
import json
import threading
import time

import jax
import pytest

from distrl import config as config_lib
from distrl import experiment as experiment_lib
from distrl.nodes.actor import VersionGate, actor_epsilon
from distrl.nodes.variables import ParamsClient


class _Source:
    """A learner handle's params side: `get_params()` answers at once; each
    `futures.get_params()` is a future the test answers (or fails) when it chooses."""

    def __init__(self):
        self.version, self.asked = 0, []
        self.futures = self._Futures(self.asked)

    def get_params(self):
        return self.version, {"w": self.version}

    def answer(self, version):
        self.asked.pop(0).set_result((version, {"w": version}))

    class _Futures:
        def __init__(self, asked):
            self._asked = asked

        def get_params(self):
            self._asked.append(concurrent.futures.Future())
            return self._asked[-1]


def _client(period=1):
    source = _Source()
    client = ParamsClient(source, update_period=period)
    assert client.wait_first(lambda: False) and client.version == 0
    return source, client


def test_params_client_swaps_in_newer_params_without_waiting():
    source, client = _client()
    assert client.update() is False and len(source.asked) == 1  # asked, not waited for
    assert client.update() is False and len(source.asked) == 1  # one request in flight
    source.answer(3)
    assert client.update() is True and (client.version, client.params) == (3, {"w": 3})
    assert client.last_lag == 3 and len(source.asked) == 1  # the next request is out
    source.answer(2)  # older than what the actor has: ignored
    assert client.update() is False and client.version == 3
    source.asked.pop(0).set_exception(ConnectionError("learner busy"))
    assert client.update() is False and client.params == {"w": 3}  # kept; asks again
    assert len(source.asked) == 1


def test_params_client_asks_every_update_period_calls():
    source, client = _client(period=3)
    asked_at = []
    for calls in range(1, 10):
        before = len(source.asked)
        client.update()
        if len(source.asked) > before:
            asked_at.append(calls)
            source.answer(calls)
    # Each answer is swapped in by the update after it arrived: 9's not yet.
    assert asked_at == [3, 6, 9] and client.version == 6


def test_params_client_first_pull_retries_and_honours_a_stop():
    class Late:
        def __init__(self):
            self.calls = 0

        def get_params(self):
            self.calls += 1
            if self.calls < 3:
                raise ConnectionError("not up yet")
            return (-1, None) if self.calls < 4 else (0, {"w": 0})

    late = Late()
    client = ParamsClient(late)
    assert client.wait_first(lambda: False) and late.calls == 4 and client.version == 0
    assert ParamsClient(Late()).wait_first(lambda: True) is False


def test_epsilon_spread_known_answers():
    """Ape-X: eps_i = eps ** (1 + spread * i / (N - 1))."""
    assert actor_epsilon(0.4, 0, 3, 7.0) == pytest.approx(0.4)
    assert actor_epsilon(0.4, 1, 3, 7.0) == pytest.approx(0.4**4.5)
    assert actor_epsilon(0.4, 2, 3, 7.0) == pytest.approx(0.4**8)
    assert actor_epsilon(0.4, 2, 3, 0.0) == 0.4  # no spread
    assert actor_epsilon(0.4, 0, 1, 7.0) == 0.4  # one actor


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
    return (
        learner,
        params,
        VersionGate(
            params, c, experiment_lib.Experiment(c).pipeline.items_per_batch(c), wait_s=0.05
        ),
    )


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
        experiment_lib.make(c)


def test_bad_importance_exponent_is_named():
    c = config_lib.base_config("dqn")
    c.replay.importance_exponent = 1.5
    with pytest.raises(config_lib.ConfigError, match="importance_exponent=1.5; need 0..1"):
        experiment_lib.make(c)


@pytest.mark.parametrize("in_flight", [0, 1, 2])
def test_the_learner_loop_keeps_at_most_in_flight_updates_started(in_flight):
    """DQN's learner starts the next update before it waits for the one before
    (`in_flight` 1); every started update is finished, in order, by the end."""
    from distrl.nodes.learner import overlapped

    started, finished, log = [], [], []

    def start(item):
        log.append(("start", item, len(finished)))
        started.append(item)

    def finish():
        finished.append(started.pop(0))

    overlapped(range(5), start, finish, lambda: len(started), in_flight)
    assert finished == list(range(5)) and not started
    # when item i starts, all but the last `in_flight` of the i before it are finished
    assert [done for _, _, done in log] == [max(0, i - in_flight) for i in range(5)]


def test_a_budget_spent_during_an_evaluation_reports_the_learners_newest_params(tmp_path):
    """The budget passed while the evaluator was evaluating (a first compile under load
    takes seconds): the run's result is the newest params', not those evaluated."""
    from configs import ppo
    from distrl.nodes.counter import Counter
    from distrl.nodes.evaluator import Evaluator

    config = ppo.get_config()
    config.budget.env_steps = 1_000
    config.evaluator.update(dict(num_envs=20, confirm_envs=20, keep_best=False))
    exp = experiment_lib.make(config)
    first = exp.agent.init(jax.random.PRNGKey(0)).params
    newest = jax.tree.map(lambda x: x + 1.0, first)

    class LearnerMovedOn:  # the learner's `get_params`: v0, then v7 (it went on meanwhile)
        calls = 0

        def get_params(self):
            self.calls += 1
            return (0, first) if self.calls == 1 else (7, newest)

    learner = LearnerMovedOn()
    counter = Counter({"env_steps": 1_000})  # spent by the first evaluation's end
    Evaluator(exp, learner, counter, None, str(tmp_path), time.time()).run()
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["stop_reason"] == "env_step_budget" and result["param_version"] == 7, result
    assert learner.calls == 2
