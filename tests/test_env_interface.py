"""The environment interface (`distrl.envs.interface`): its contract on the gridworld,
and a capability-less JAX env written here (uint8 observations; no success signal,
no tabular model, no grid) through the rollout, the pipelines, the memory estimate,
the evaluation and the single-process trainer. Also: nothing outside `distrl/envs/`
names `GridWorld`."""

import ast
import dataclasses
import pathlib
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import load_config

from distrl import agents, envs, local, pipelines, resources
from distrl import config as config_lib
from distrl import experiment as experiment_lib
from distrl.acting import evaluation, reporting, rollout
from distrl.envs import LEFT, RIGHT, UP, make_env

ROOT = pathlib.Path(__file__).resolve().parent.parent
KEY = jax.random.PRNGKey(0)


# -- a toy env of the interface, with no optional capability -----------------------
class CorridorState(NamedTuple):
    position: jax.Array  # int32 []
    t: jax.Array  # int32 []


@dataclasses.dataclass(frozen=True)
class Corridor:
    """Cells 0..length-1; the episode starts at a random cell of the left half, action 1
    moves right, 0 left (walls clip). Reaching the right end terminates with reward 1;
    `limit` steps truncate. Observation: uint8 [2] = (position, steps taken)."""

    length: int = 6
    limit: int = 5

    @property
    def spec(self) -> envs.EnvSpec:
        return envs.EnvSpec((2,), "uint8", 2, self.limit)

    def observe(self, state):
        return jnp.stack([state.position, state.t]).astype(jnp.uint8)

    def reset(self, key):
        start = jax.random.randint(key, (), 0, self.length // 2)
        state = CorridorState(start.astype(jnp.int32), jnp.int32(0))
        return state, envs.timestep(self.observe(state), 0.0, False, False)

    def step(self, state, action, key):
        del key
        move = jnp.where(action == 1, 1, -1)
        position = jnp.clip(state.position + move, 0, self.length - 1)
        state = CorridorState(position, state.t + 1)
        terminated = position == self.length - 1
        reward = jnp.where(terminated, 1.0, 0.0)
        return state, envs.timestep(self.observe(state), reward, terminated, state.t >= self.limit)


def _same(a, b, rtol: float = 0.0):
    """Equal arrays, floats within `rtol` (float physics fuses differently under jit)."""
    if rtol and np.issubdtype(np.asarray(a).dtype, np.floating):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol)
    else:
        np.testing.assert_array_equal(a, b)


def _check_contract(env, batch: int = 3, steps: int = 7, rtol: float = 0.0):
    """jit and vmap of reset/step agree with single eager calls (floats within rtol);
    observations follow the spec; `last` and `discount` encode terminated / truncated
    exactly."""
    spec = env.spec
    assert isinstance(env, envs.Environment)
    hash(env)  # a static jit argument
    actions = jax.random.randint(jax.random.PRNGKey(1), (steps, batch), 0, spec.num_actions)
    keys = jax.random.split(jax.random.PRNGKey(2), (steps + 1) * batch).reshape(
        steps + 1, batch, -1
    )

    def batched(actions, keys):
        state, first = jax.vmap(env.reset)(keys[0])
        body = lambda s, xs: jax.vmap(env.step)(s, *xs)  # noqa: E731
        return first, jax.lax.scan(body, state, (actions, keys[1:]))[1]

    first, stepped = jax.jit(batched)(actions, keys)
    assert first.observation.shape == (batch, *spec.observation_shape)
    assert first.observation.dtype == np.dtype(spec.observation_dtype)
    assert stepped.observation.dtype == np.dtype(spec.observation_dtype)
    for b in range(batch):
        state, ts = env.reset(keys[0, b])
        _same(ts.observation, first.observation[b], rtol)
        np.testing.assert_array_equal(env.observe(state), ts.observation)
        for t in range(steps):
            state, ts = env.step(state, actions[t, b], keys[t + 1, b])
            got = jax.tree.map(lambda x, t=t, b=b: x[t, b], stepped)
            jax.tree.map(lambda x, y: _same(x, y, rtol), ts, got)
    last, discount = np.asarray(stepped.last), np.asarray(stepped.discount)
    terminated, truncated = np.asarray(stepped.terminated), np.asarray(stepped.truncated)
    np.testing.assert_array_equal(terminated, last & (discount == 0))
    np.testing.assert_array_equal(truncated, last & (discount == 1))
    assert set(np.unique(discount)) <= {0.0, 1.0}
    assert not (terminated & truncated).any()


# -- the contract on the gridworld -------------------------------------------------
@pytest.mark.parametrize("slippery", [False, True])
def test_gridworld_meets_the_contract_and_has_every_capability(slippery):
    env = make_env("4x4", slippery=slippery, time_limit=4)
    assert env.spec == envs.EnvSpec((16,), "float32", 4, 4) and env.spec.obs_size == 16
    _check_contract(env)
    assert envs.success_signal(env) is not None
    assert envs.tabular_model(env) is env and envs.grid_of(env) is env
    assert envs.is_deterministic(env) is (not slippery)
    assert reporting.has_grids(env)


def test_gridworld_terminated_and_truncated_are_apart():
    env = make_env("4x4", time_limit=3)
    state, _ = env.reset(KEY)
    for _ in range(3):  # LEFT at S is a wall: the third step hits the limit in a live cell
        state, ts = env.step(state, LEFT, KEY)
    assert bool(ts.last) and bool(ts.truncated) and not bool(ts.terminated)
    assert float(ts.discount) == 1.0  # bootstrapped
    _, ts = env.step(envs.EnvState(jnp.int32(4), jnp.int32(0)), RIGHT, KEY)  # into H at 5
    assert bool(ts.terminated) and not bool(ts.truncated) and float(ts.discount) == 0.0
    # Landing on G on the time-limit step: termination wins (no bootstrap).
    _, ts = env.step(envs.EnvState(jnp.int32(14), jnp.int32(2)), RIGHT, KEY)
    assert bool(ts.terminated) and not bool(ts.truncated) and float(ts.reward) == 1.0


def test_timestep_encoding():
    for terminated, truncated, discount, last in [
        (False, False, 1.0, False),
        (False, True, 1.0, True),
        (True, False, 0.0, True),
        (True, True, 0.0, True),
    ]:
        ts = envs.timestep(jnp.zeros(2), 0.5, terminated, truncated)
        assert (float(ts.discount), bool(ts.last)) == (discount, last)
        assert bool(ts.terminated) == terminated and ts.reward.dtype == jnp.float32
        assert bool(ts.truncated) == (truncated and not terminated)


def test_rollout_records_truncation_with_the_pre_reset_observation():
    env = make_env("4x4", time_limit=3)
    agent = agents.make_agent(agents.make_config("dqn", hidden_sizes=(8,)), env.spec)
    params = agent.init(KEY).params
    # UP at S is a wall: every episode is truncated after 3 steps, in the start cell.
    up = lambda params, key, obs, eps: (jnp.full(obs.shape[:1], UP, jnp.int32), {})  # noqa: E731
    carry = rollout.init_carry(env, KEY, 2)
    _, chunk, stats = rollout.make_rollout(env, up, 7)(params, carry, KEY, 0.0)
    np.testing.assert_array_equal(chunk.last[:, 0], [0, 0, 1, 0, 0, 1, 0])
    np.testing.assert_array_equal(chunk.discount, np.ones((7, 2)))
    start = np.eye(16, dtype=np.float32)[0]
    np.testing.assert_array_equal(chunk.next_observation[2, 0], start)  # S, not a reset
    assert int(stats.episodes) == 4 and int(stats.successes) == 0


# -- a capability-less env through the data path -------------------------------------
def test_corridor_meets_the_contract_and_has_no_capability():
    env = Corridor()
    _check_contract(env, steps=9)
    assert envs.success_signal(env) is None and envs.tabular_model(env) is None
    assert envs.grid_of(env) is None and not envs.is_deterministic(env)
    assert not reporting.has_grids(env)


def test_corridor_auto_reset_keeps_the_pre_reset_observation():
    env = Corridor(length=3, limit=9)
    state = CorridorState(jnp.int32(1), jnp.int32(4))
    state, ts = envs.auto_reset_step(env, state, 1, KEY)  # reaches the right end
    assert bool(ts.terminated) and float(ts.discount) == 0.0
    np.testing.assert_array_equal(ts.observation, np.array([2, 5], np.uint8))
    assert int(state.t) == 0 and int(state.position) < 1  # reset to the left half


def _corridor_config(algorithm: str):
    config = load_config(algorithm)
    config.num_actors, config.actor.num_envs, config.actor.unroll_length = 1, 8, 8
    config.evaluator.update(dict(target_success=0.0, target_of_optimal=0.0, num_envs=8))
    config.evaluator.confirm_envs = 16
    config.budget.env_steps = 1_024
    config.agent.hidden_sizes = (8,)
    if algorithm == "dqn":
        config.learner.batch_size, config.replay.min_size = 32, 64
    else:  # one actor: every chunk is a batch
        config.learner.batch_chunks = 1
    return config


def test_corridor_rollout_keeps_the_spec_dtype():
    env = Corridor()
    agent = agents.make_agent(agents.make_config("ppo", hidden_sizes=(8,)), env.spec)
    params = agent.init(KEY).params
    carry = rollout.init_carry(env, KEY, 4)
    _, chunk, stats = rollout.make_rollout(env, agent.policy, 12)(params, carry, KEY, 0.0)
    assert chunk.observation.shape == (12, 4, 2) and chunk.observation.dtype == jnp.uint8
    assert chunk.next_observation.dtype == jnp.uint8
    assert int(stats.episodes) >= 8  # every episode ends within 5 steps
    assert int(stats.successes) == 0  # no success signal: nothing counts as one
    ended = np.asarray(chunk.last)
    discount, reward = np.asarray(chunk.discount), np.asarray(chunk.reward)
    np.testing.assert_array_equal(discount[ended] == 0, reward[ended] > 0)


@pytest.mark.parametrize("algorithm", ["dqn", "ppo", "grpo"])
def test_corridor_items_take_shape_and_dtype_from_the_spec(algorithm):
    """The example items (tests/test_replay.py checks the Reverb signature made of them)."""
    config = _corridor_config(algorithm)
    pipeline = pipelines.of(experiment_lib.Experiment(config).agent_config)
    grid = make_env("4x4", time_limit=Corridor().limit)  # the same GRPO episode window
    item = pipeline.example_item(config, Corridor()).data
    grid_item = pipeline.example_item(config, grid).data
    for name in ("observation", "next_observation"):
        obs, grid_obs = getattr(item, name), getattr(grid_item, name)
        assert obs.dtype == np.uint8 and obs.shape[-1] == 2
        assert grid_obs.dtype == np.float32 and grid_obs.shape[-1] == 16
        assert obs.shape[:-1] == grid_obs.shape[:-1]
    shrink = 2 * obs[..., 0].size * (16 * 4 - 2)  # two observations per step, 64 B -> 2 B
    assert pipeline.item_bytes(config, grid) - pipeline.item_bytes(config, Corridor()) == shrink
    memory = resources.estimate_memory(experiment_lib.Experiment(config, Corridor()), local=True)
    assert (
        0
        < memory.total
        < resources.estimate_memory(experiment_lib.Experiment(config), local=True).total
    )


def test_corridor_evaluation_counts_no_success():
    env = Corridor()
    agent = agents.make_agent(agents.make_config("dqn", hidden_sizes=(8,)), env.spec)
    evaluate = evaluation.make_evaluator(env, agent, 16)
    result = jax.device_get(evaluate(agent.init(KEY).params, KEY))
    assert result.episodes == 16 and result.success_rate == 0.0
    assert 1.0 <= result.mean_length <= env.limit


@pytest.mark.parametrize("algorithm", ["dqn", "ppo"])
def test_corridor_trains_in_the_single_process_trainer(algorithm):
    config = _corridor_config(algorithm)
    result = local.train(config, env=Corridor())
    assert not result.solved and result.env_steps >= 1_024 and result.updates > 0
    assert result.exact is None and result.report == "" and result.success_rate == 0.0
    assert result.eval_episodes == 16 and result.mean_length <= 5
    assert all(np.isnan(h[2]) for h in result.history)  # no exact success to judge


def test_targets_the_env_cannot_score_are_config_errors():
    config = _corridor_config("ppo")
    config.evaluator.target_success = 0.9
    with pytest.raises(config_lib.ConfigError, match="target_success=0.9: .* no success signal"):
        local.train(config, env=Corridor())
    config.evaluator.target_success, config.evaluator.target_of_optimal = 0.0, 0.98
    with pytest.raises(config_lib.ConfigError, match="target_of_optimal=0.98: .* no tabular"):
        local.train(config, env=Corridor())
    with pytest.raises(config_lib.ConfigError, match="not an environment"):
        experiment_lib.make(config, object())
    experiment_lib.make(load_config("dqn_slippery8x8"), make_env("8x8", slippery=True))


# -- nothing outside distrl/envs/ names the gridworld --------------------------------
def test_nothing_outside_envs_names_gridworld():
    offenders = []
    for folder in ("distrl", "launch", "benchmarks"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if (ROOT / "distrl" / "envs") in path.parents:
                continue
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                names = []
                if isinstance(node, ast.Name):
                    names = [node.id]
                elif isinstance(node, ast.Attribute):
                    names = [node.attr]
                elif isinstance(node, ast.alias):
                    names = [node.name, node.name.rsplit(".", 1)[-1]]
                elif isinstance(node, ast.ImportFrom):
                    names = [node.module or ""]
                if any(n in ("GridWorld", "gridworld", "distrl.envs.gridworld") for n in names):
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not offenders, offenders
