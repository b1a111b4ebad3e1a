"""Tests for distrl.envs: FrozenLake-v1 dynamics, batching, auto-reset, dm_env."""

import collections
import dataclasses

import dm_env
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from absl.testing import absltest
from dm_env import test_utils

from distrl.envs import (
    DOWN,
    LEFT,
    MAPS,
    RIGHT,
    UP,
    EnvState,
    GridWorld,
    auto_reset_step,
    make_env,
    random_map,
    shortest_path_length,
    validate_map,
)
from distrl.envs.dm_env_adapter import DmEnvAdapter

KEY = jax.random.PRNGKey(0)
GOAL_PATH = (RIGHT, RIGHT, DOWN, DOWN, DOWN, RIGHT)  # 0 -> 1 -> 2 -> 6 -> 10 -> 14 -> 15
OPEN_3X3 = ("SFF", "FFF", "FFG")  # No holes: every move from the centre is distinct.


def at(cell, t=0):
    return EnvState(jnp.int32(cell), jnp.int32(t))


def run_actions(env, actions, state=None):
    """Steps one env through `actions` eagerly; returns the list of (state, timestep)."""
    state = env.reset(KEY)[0] if state is None else state
    out = []
    for a in actions:
        state, ts = env.step(state, a, KEY)
        out.append((state, ts))
    return out


# -- maps ------------------------------------------------------------------------
def test_named_maps_match_gymnasium():
    assert MAPS["4x4"] == ("SFFF", "FHFH", "FFFH", "HFFG")
    assert MAPS["8x8"] == (
        "SFFFFFFF", "FFFFFFFF", "FFFHFFFF", "FFFFFHFF",
        "FFFHFFFF", "FHHFFFHF", "FHFFHFHF", "FFFHFFFG",
    )  # fmt: skip
    assert make_env().desc == MAPS["4x4"]
    assert make_env("8x8").desc == MAPS["8x8"]
    assert shortest_path_length(MAPS["4x4"]) == 6


def _solvable(desc):
    """Independent flood fill (not the library BFS) over non-hole cells from S."""
    grid = np.array([list(r) for r in desc])
    reach = grid == "S"
    walk = grid != "H"
    for _ in range(grid.size):
        # Expand only from reached cells that are not goals (holes are never reached).
        src = reach & (grid != "G")
        grown = reach.copy()
        grown[1:] |= src[:-1]
        grown[:-1] |= src[1:]
        grown[:, 1:] |= src[:, :-1]
        grown[:, :-1] |= src[:, 1:]
        reach = grown & (walk | (grid == "G"))
    return bool((reach & (grid == "G")).any())


@pytest.mark.parametrize("size,p", [(8, 0.8), (4, 0.6), (6, 0.5), ((3, 7), 0.7), (2, 0.3)])
def test_random_maps_solvable_and_deterministic(size, p):
    descs = [random_map(size, seed, p_frozen=p) for seed in range(60)]
    rows, cols = (size, size) if isinstance(size, int) else size
    for seed, desc in enumerate(descs):
        assert len(desc) == rows and all(len(r) == cols for r in desc)
        assert desc[0][0] == "S" and desc[-1][-1] == "G"
        assert set("".join(desc)) <= set("SFHG")
        assert _solvable(desc), desc
        assert random_map(size, seed, p_frozen=p) == desc
    assert len(set(descs)) > 1  # Seeds matter.
    if p < 0.8 and rows * cols > 4:
        assert any("H" in "".join(d) for d in descs)


def test_random_map_specs():
    assert make_env("random:8x8:seed=3").desc == random_map(8, 3)
    assert make_env("random:6x6:seed=1:p=0.7").desc == random_map(6, 1, p_frozen=0.7)
    assert make_env("random:3x5:seed=2").desc == random_map((3, 5), 2)


def test_default_time_limits():
    assert make_env("4x4").time_limit == 100
    assert make_env("8x8").time_limit == 200
    assert make_env("random:8x8:seed=0").time_limit == 200
    assert make_env(OPEN_3X3).time_limit == 200
    assert make_env("8x8", time_limit=7).time_limit == 7


def test_env_is_frozen_hashable_and_canonical():
    a = make_env(["SFFF", "FHFH", "FFFH", "HFFG"], rewards=[1, -1, 0])
    b = make_env("4x4")
    assert a == b and hash(a) == hash(b)
    assert isinstance(a.desc, tuple) and a.rewards == (1.0, -1.0, 0.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.slippery = True
    assert (a.rows, a.cols, a.num_cells, a.obs_size, a.num_actions) == (4, 4, 16, 16, 4)
    # Usable as a static argument: one compile per distinct env.
    step = jax.jit(lambda env, s, act: env.step(s, act, KEY)[0].position, static_argnums=0)
    assert int(step(a, at(0), RIGHT)) == 1


def test_cell_kinds_helpers():
    env = make_env("4x4")
    kinds = env.cell_kinds()
    assert kinds.shape == (4, 4) and kinds[0, 0] == "S" and kinds[3, 3] == "G"
    assert env.hole_mask().sum() == 4 and env.hole_mask()[1, 1]
    assert env.goal_mask().sum() == 1 and env.goal_mask()[3, 3]
    assert env.start_cell == 0 and env.cell_coords(14) == (3, 2)


# -- deterministic transitions on the 4x4 map -------------------------------------
def test_reset():
    env = make_env()
    state, ts = env.reset(KEY)
    assert int(state.position) == 0 and int(state.t) == 0
    np.testing.assert_array_equal(ts.observation, np.eye(16, dtype=np.float32)[0])
    assert ts.observation.dtype == jnp.float32
    assert float(ts.reward) == 0.0 and float(ts.discount) == 1.0 and not bool(ts.last)


@pytest.mark.parametrize(
    "cell,action,expected",
    [
        (0, LEFT, 0), (0, UP, 0), (0, RIGHT, 1), (0, DOWN, 4),
        (3, RIGHT, 3), (3, UP, 3), (3, LEFT, 2),
        (13, DOWN, 13), (14, DOWN, 14), (8, LEFT, 8), (4, LEFT, 4),
    ],
)  # fmt: skip
def test_4x4_moves_and_walls(cell, action, expected):
    env = make_env()
    state, ts = env.step(at(cell), action, KEY)
    assert int(state.position) == expected and int(state.t) == 1
    assert float(ts.reward) == 0.0 and float(ts.discount) == 1.0 and not bool(ts.last)
    assert int(jnp.argmax(ts.observation)) == expected


@pytest.mark.parametrize("corner", [0, 2, 6, 8])
def test_walls_at_every_corner(corner):
    env = make_env(("SFF", "FFF", "FGF"), rewards=(1.0, -1.0, -0.1))  # Walkable corners.
    row, col = divmod(corner, 3)
    for action, (dr, dc) in enumerate([(0, -1), (1, 0), (0, 1), (-1, 0)]):
        nr, nc = row + dr, col + dc
        blocked = not (0 <= nr < 3 and 0 <= nc < 3)
        state, ts = env.step(at(corner), action, KEY)
        expected = corner if blocked else nr * 3 + nc
        assert int(state.position) == expected, (corner, action)
        assert float(ts.reward) == (1.0 if expected == 7 else np.float32(-0.1))


def test_step_into_hole():
    env = make_env()
    state, ts = env.step(at(1), DOWN, KEY)  # Cell 5 is H.
    assert int(state.position) == 5
    assert float(ts.reward) == -1.0 and float(ts.discount) == 0.0 and bool(ts.last)


def test_shortest_path_reaches_goal():
    env = make_env()
    out = run_actions(env, GOAL_PATH)
    assert [int(s.position) for s, _ in out] == [1, 2, 6, 10, 14, 15]
    for _, ts in out[:-1]:
        assert float(ts.reward) == 0.0 and float(ts.discount) == 1.0 and not bool(ts.last)
    final = out[-1][1]
    assert float(final.reward) == 1.0 and float(final.discount) == 0.0 and bool(final.last)


def test_custom_rewards():
    env = make_env(rewards=(10.0, -5.0, -0.1))
    out = run_actions(env, GOAL_PATH)
    np.testing.assert_allclose([float(ts.reward) for _, ts in out], [-0.1] * 5 + [10.0])
    assert float(env.step(at(1), DOWN, KEY)[1].reward) == -5.0


def test_step_past_the_end_is_absorbing():
    env = make_env()
    state, ts = env.step(at(15), LEFT, KEY)
    assert int(state.position) == 15 and float(ts.reward) == 0.0
    assert float(ts.discount) == 0.0 and bool(ts.last)


def _scan_fixed_action(env, action, steps):
    def body(state, _):
        state, ts = env.step(state, action, KEY)
        return state, ts

    return jax.jit(lambda: jax.lax.scan(body, env.reset(KEY)[0], None, length=steps))()


def test_truncation_at_default_time_limit():
    env = make_env()
    _, ts = _scan_fixed_action(env, LEFT, 100)  # Bumps the wall at S forever.
    assert not ts.last[:99].any()
    assert bool(ts.last[99]) and float(ts.discount[99]) == 1.0 and float(ts.reward[99]) == 0.0


def test_truncation_at_custom_time_limit():
    env = make_env(time_limit=5)
    _, ts = _scan_fixed_action(env, UP, 5)
    np.testing.assert_array_equal(ts.last, [False] * 4 + [True])
    np.testing.assert_array_equal(ts.discount, [1.0] * 5)


def test_termination_on_the_time_limit_step_wins():
    env = make_env(time_limit=6)
    final = run_actions(env, GOAL_PATH)[-1][1]
    assert bool(final.last) and float(final.discount) == 0.0 and float(final.reward) == 1.0
    env = make_env(time_limit=2)
    final = run_actions(env, (RIGHT, DOWN))[-1][1]  # Hole at t == time_limit.
    assert bool(final.last) and float(final.discount) == 0.0 and float(final.reward) == -1.0


def test_out_of_range_action_is_clipped_inside_jit():
    env = make_env(OPEN_3X3)
    step = jax.jit(lambda s, a: env.step(s, a, KEY)[0].position)
    assert int(step(at(4), jnp.int32(7))) == int(step(at(4), jnp.int32(UP))) == 1
    assert int(step(at(4), jnp.int32(-3))) == int(step(at(4), jnp.int32(LEFT))) == 3


# -- slippery dynamics ---------------------------------------------------------------
def test_slip_probabilities():
    env = make_env(OPEN_3X3, slippery=True)
    n = 30_000
    keys = jax.random.split(jax.random.PRNGKey(42), 4 * n)
    actions = jnp.repeat(jnp.arange(4, dtype=jnp.int32), n)
    starts = EnvState(jnp.full(4 * n, 4, jnp.int32), jnp.zeros(4 * n, jnp.int32))
    positions = np.asarray(jax.jit(jax.vmap(env.step))(starts, actions, keys)[0].position)
    target = {LEFT: 3, DOWN: 7, RIGHT: 5, UP: 1}  # Neighbours of the centre cell 4.
    sigma = np.sqrt(n * (1 / 3) * (2 / 3))
    for a in range(4):
        counts = collections.Counter(positions[a * n : (a + 1) * n].tolist())
        allowed = {target[(a - 1) % 4], target[a], target[(a + 1) % 4]}
        assert set(counts) == allowed, (a, counts)  # Never the opposite direction.
        for cell in allowed:
            assert abs(counts[cell] - n / 3) < 5 * sigma, (a, counts)


def test_not_slippery_is_deterministic():
    env = make_env(OPEN_3X3)
    keys = jax.random.split(KEY, 1000)
    starts = EnvState(jnp.full(1000, 4, jnp.int32), jnp.zeros(1000, jnp.int32))
    positions = jax.vmap(env.step, in_axes=(0, None, 0))(starts, UP, keys)[0].position
    assert (np.asarray(positions) == 1).all()


# -- batching and jit ------------------------------------------------------------
def test_vmap_and_jit_match_single_env_calls():
    env = make_env("8x8", slippery=True)
    batch, steps = 4, 6
    actions = jax.random.randint(jax.random.PRNGKey(1), (steps, batch), 0, 4)
    keys = jax.random.split(jax.random.PRNGKey(2), steps * batch).reshape(steps, batch, -1)

    def batched_rollout(actions, keys):
        state = jax.vmap(env.reset)(keys[0])[0]

        def body(state, xs):
            return jax.vmap(env.step)(state, *xs)

        return jax.lax.scan(body, state, (actions, keys))

    _, batched = jax.jit(batched_rollout)(actions, keys)
    for b in range(batch):
        state = env.reset(keys[0, b])[0]
        for t in range(steps):
            state, ts = env.step(state, actions[t, b], keys[t, b])
            got = jax.tree.map(lambda x, t=t, b=b: x[t, b], batched)
            jax.tree.map(np.testing.assert_array_equal, ts, got)


# -- auto-reset ------------------------------------------------------------------
def _auto_reset_scan(env, actions):
    """Scans auto_reset_step over actions [T]; returns (final state, (states, timesteps))."""

    def body(state, xs):
        next_state, ts = auto_reset_step(env, state, *xs)
        return next_state, (next_state, ts)

    keys = jax.random.split(KEY, actions.shape[0])
    return jax.lax.scan(body, env.reset(KEY)[0], (actions, keys))


def test_auto_reset_on_goal_keeps_final_observation():
    env = make_env()
    actions = jnp.array(GOAL_PATH * 2 + (DOWN,), jnp.int32)
    _, (states, ts) = jax.jit(lambda a: _auto_reset_scan(env, a))(actions)
    last = np.asarray(ts.last)
    np.testing.assert_array_equal(np.nonzero(last)[0], [5, 11])
    for t in (5, 11):
        assert int(jnp.argmax(ts.observation[t])) == 15  # Final obs visible.
        assert float(ts.reward[t]) == 1.0 and float(ts.discount[t]) == 0.0
        assert int(states.position[t]) == 0 and int(states.t[t]) == 0  # State reset.
    # The second episode really starts from S: its first move lands on cell 1.
    assert int(states.position[6]) == 1 and int(states.t[6]) == 1
    assert int(states.position[12]) == 4  # DOWN from S after the second reset.


def test_auto_reset_on_truncation_is_batched():
    env = make_env(time_limit=3)
    batch_actions = jnp.array([[LEFT] * 7, [UP] * 7], jnp.int32)  # [B, T]
    _, (states, ts) = jax.jit(jax.vmap(lambda a: _auto_reset_scan(env, a)))(batch_actions)
    for b in range(2):
        np.testing.assert_array_equal(ts.last[b], [0, 0, 1, 0, 0, 1, 0])
        np.testing.assert_array_equal(ts.discount[b], [1.0] * 7)
        np.testing.assert_array_equal(states.t[b], [1, 2, 0, 1, 2, 0, 1])


# -- dm_env adapter ----------------------------------------------------------------
def test_dm_env_specs():
    adapter = DmEnvAdapter(make_env("8x8"), seed=0)
    obs_spec = adapter.observation_spec()
    assert obs_spec.shape == (64,) and obs_spec.dtype == np.float32
    action_spec = adapter.action_spec()
    assert isinstance(action_spec, dm_env.specs.DiscreteArray) and action_spec.num_values == 4


def test_dm_env_episode_semantics():
    adapter = DmEnvAdapter(make_env(), seed=0)
    first = adapter.step(RIGHT)  # A fresh env starts an episode, ignoring the action.
    assert first.first() and first.reward is None and first.discount is None
    assert int(np.argmax(first.observation)) == 0
    steps = [adapter.step(a) for a in GOAL_PATH]
    assert all(s.mid() and s.reward == 0.0 and s.discount == 1.0 for s in steps[:-1])
    assert steps[-1].last() and steps[-1].reward == 1.0 and steps[-1].discount == 0.0
    assert int(np.argmax(steps[-1].observation)) == 15
    again = adapter.step(LEFT)  # After LAST, step() resets.
    assert again.first() and int(np.argmax(again.observation)) == 0
    assert adapter.step(DOWN).mid()


def test_dm_env_truncation():
    adapter = DmEnvAdapter(make_env(time_limit=3), seed=0)
    adapter.reset()
    steps = [adapter.step(LEFT) for _ in range(3)]
    assert [s.step_type for s in steps] == [dm_env.StepType.MID] * 2 + [dm_env.StepType.LAST]
    assert steps[-1].discount == 1.0 and steps[-1].reward == 0.0
    assert adapter.step(LEFT).first()


@pytest.mark.parametrize("action", [4, -1, 1.5, np.array([0, 1])])
def test_dm_env_rejects_bad_actions(action):
    adapter = DmEnvAdapter(make_env(), seed=0)
    adapter.reset()
    with pytest.raises(ValueError, match="action"):
        adapter.step(action)


class DmEnvConformanceTest(test_utils.EnvironmentTestMixin, absltest.TestCase):
    """dm_env's own contract checks, with actions that end episodes both ways."""

    def make_object_under_test(self):
        return DmEnvAdapter(make_env(time_limit=4), seed=1)

    def make_action_sequence(self):
        # Two truncations (wall bumping), then a hole, then a goal.
        yield from [LEFT] * 9 + [RIGHT, DOWN] + [RIGHT] + list(GOAL_PATH)


# -- bad input -------------------------------------------------------------------
@pytest.mark.parametrize(
    "desc,match",
    [
        (("SFFS", "FFFG"), "exactly one S"),
        (("FFFF", "FFFG"), "exactly one S"),
        (("SFFF", "FFFF"), "no G"),
        (("SFXF", "FFFG"), "unknown letters"),
        (("sfff", "fffg"), "unknown letters"),
        (("SFFF", "FFG"), "ragged rows"),
        ((), "empty map"),
        (("",), "empty map"),
        (("SH", "HG"), "no path from S to G"),
        (("SFHFG",), "no path from S to G"),
    ],
)
def test_bad_maps_raise(desc, match):
    with pytest.raises(ValueError, match=match):
        make_env(desc)
    with pytest.raises(ValueError, match=match):
        GridWorld(desc)


@pytest.mark.parametrize(
    "spec,match",
    [
        ("5x5", r"unknown map name.*'4x4', '8x8'"),
        ("random:8by8:seed=1", "bad random map spec"),
        ("random:8x8", "missing seed"),
        ("random:8x8:seed=x", "seed must be int"),
        ("random:8x8:seed=1:q=3", "unknown or repeated option"),
        ("random:8x8:seed=1:p=0", "p_frozen must be in"),
        ("random:1x1:seed=1", "at least 2 cells"),
    ],
)
def test_bad_map_specs_raise(spec, match):
    with pytest.raises(ValueError, match=match):
        make_env(spec)


def test_bad_settings_raise():
    for limit in (0, -5, 2.5, True):
        with pytest.raises(ValueError, match="time_limit"):
            make_env(time_limit=limit)
    for rewards in ((1.0, -1.0), (1.0, -1.0, 0.0, 0.0)):
        with pytest.raises(ValueError, match="rewards must be"):
            make_env(rewards=rewards)
    with pytest.raises(ValueError, match="sequence of row strings"):
        validate_map("SFFG")


@pytest.mark.parametrize("action", [4, -1, np.int32(9), 2.0])
def test_python_level_step_rejects_bad_actions(action):
    env = make_env()
    with pytest.raises(ValueError, match="action"):
        env.step(at(0), action, KEY)
