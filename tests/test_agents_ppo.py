"""PPO / GRPO: clipped-loss and group-advantage known answers, the fused update."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from distrl import agents, networks
from distrl.agents import advantages as adv_lib
from distrl.agents import ppo
from distrl.types import Transition

SPEC = agents.EnvSpec(3, 2)
PARAMS = {
    "policy_head": {
        "w": jnp.array([[0.5, -0.5], [1.0, 0.0], [0.0, 2.0]]),
        "b": jnp.array([0.1, 0.0]),
    },
    "value_head": {"w": jnp.array([[0.3], [-0.2], [0.6]]), "b": jnp.array([0.05])},
}


def np_forward(obs):
    p = jax.tree.map(np.asarray, PARAMS)
    logits = obs @ p["policy_head"]["w"] + p["policy_head"]["b"]
    log_pi = logits - np.log(np.sum(np.exp(logits), -1, keepdims=True))
    return log_pi, (obs @ p["value_head"]["w"] + p["value_head"]["b"])[..., 0]


def hand_minibatch():
    obs = np.eye(3, dtype=np.float32)[[0, 1, 2, 2]]
    return ppo.PPOSample(
        observation=jnp.asarray(obs),
        action=jnp.array([0, 1, 1, 0], jnp.int32),
        behaviour_log_prob=jnp.log(jnp.array([0.5, 0.2, 0.9, 0.1])),
        behaviour_value=jnp.array([0.0, 0.0, 1.0, 0.6]),
        advantage=jnp.array([1.0, -2.0, 0.5, 3.0]),
        value_target=jnp.array([1.0, 0.0, -1.0, 0.5]),
    )


@pytest.mark.parametrize("clip_value", [False, True])
def test_clipped_loss_known_answer(clip_value):
    config = ppo.PPOConfig(
        hidden_sizes=(), clip_epsilon=0.2, value_coef=0.5, entropy_coef=0.1, clip_value=clip_value
    )
    agent = ppo.make_agent(config, SPEC)
    mb = hand_minibatch()
    loss, metrics = ppo.minibatch_loss(agent.network, config, PARAMS, mb)
    log_pi, v = np_forward(np.asarray(mb.observation))
    a, adv = np.asarray(mb.action), np.asarray(mb.advantage)
    ratio = np.exp(log_pi[np.arange(4), a] - np.asarray(mb.behaviour_log_prob))
    surrogate = np.minimum(ratio * adv, np.clip(ratio, 0.8, 1.2) * adv)
    target, old_v = np.asarray(mb.value_target), np.asarray(mb.behaviour_value)
    value_err = (v - target) ** 2
    if clip_value:
        value_err = np.maximum(value_err, (old_v + np.clip(v - old_v, -0.2, 0.2) - target) ** 2)
    entropy = np.mean(-np.sum(np.exp(log_pi) * log_pi, -1))
    expected = -np.mean(surrogate) + 0.5 * 0.5 * np.mean(value_err) - 0.1 * entropy
    np.testing.assert_allclose(loss, expected, rtol=1e-5)
    np.testing.assert_allclose(
        metrics["clip_fraction"], np.mean(np.abs(ratio - 1) > 0.2), rtol=1e-6
    )
    np.testing.assert_allclose(metrics["approx_kl"], np.mean(ratio - 1 - np.log(ratio)), rtol=1e-5)
    grads = jax.grad(lambda p: ppo.minibatch_loss(agent.network, config, p, mb)[0])(PARAMS)
    assert all(np.all(np.isfinite(g)) and np.any(g != 0) for g in jax.tree.leaves(grads))


def chunks(rewards, lasts):
    """Batch [T, N] from per-column rewards and lasts (obs are irrelevant here)."""
    r = jnp.asarray(rewards, jnp.float32).T
    last = jnp.asarray(lasts, bool).T
    obs = jnp.zeros(r.shape + (3,))
    return Transition(obs, jnp.zeros(r.shape, jnp.int32), r, 1.0 - last, last, obs, {})


def test_grpo_known_answer():
    # column 0: two episodes, returns 0 + 0.5 * 1 and 0 + 0.5 * -1 (gamma 0.5);
    # column 1: one episode with return 0, then one still running (weight 0).
    batch = chunks([[0, 1, 0, -1], [0, 0, 0, 1]], [[0, 1, 0, 1], [0, 0, 1, 0]])
    adv, weights, group = adv_lib.grpo(batch, 0.5)
    std = np.sqrt((0.25 + 0.25 + 0.0) / 3)
    expected = np.array([[0.5, 0.5, -0.5, -0.5], [0, 0, 0, 0]]).T / std
    np.testing.assert_allclose(adv, expected, rtol=1e-5)
    np.testing.assert_array_equal(weights, np.array([[1, 1, 1, 1], [1, 1, 1, 0]]).T)
    assert float(group) == 3


def test_normalize_known_answer():
    adv = jnp.array([1.0, 3.0, 100.0])
    out = adv_lib.normalize(adv, jnp.array([1.0, 1.0, 0.0]))
    np.testing.assert_allclose(out, [-1.0, 1.0, 0.0], rtol=1e-6)


def batch_with_extras(key, t=4, n=3):
    keys = jax.random.split(key, 3)
    obs = jax.nn.one_hot(jax.random.randint(keys[0], (t, n), 0, 3), 3)
    last = jax.random.uniform(keys[1], (t, n)) < 0.3
    return Transition(
        observation=obs,
        action=jax.random.randint(keys[2], (t, n), 0, 2),
        reward=jnp.where(last, 1.0, 0.0),
        discount=jnp.where(last, 0.0, 1.0),
        last=last,
        next_observation=jnp.roll(obs, -1, axis=0),
        extras={"log_prob": jnp.full((t, n), np.log(0.5)), "value": jnp.zeros((t, n))},
    )


def test_one_epoch_one_minibatch_is_one_adam_step():
    config = ppo.PPOConfig(hidden_sizes=(), num_epochs=1, num_minibatches=1, max_grad_norm=0.0)
    agent = ppo.make_agent(config, SPEC)
    state = agent.init(jax.random.PRNGKey(0))
    batch = batch_with_extras(jax.random.PRNGKey(1))
    new_state, _ = agent.update(state, batch)

    @jax.jit
    def one_adam_step(params):
        adv, targets, _ = ppo.batch_advantages(agent.network, config, params, batch)
        samples = ppo.make_samples(batch, adv, targets)
        grads = jax.grad(lambda p: ppo.minibatch_loss(agent.network, config, p, samples)[0])(params)
        opt = optax.adam(config.learning_rate)
        updates, _ = opt.update(grads, opt.init(params), params)
        return optax.apply_updates(params, updates)

    expected = one_adam_step(state.params)
    jax.tree.map(
        lambda x, y: np.testing.assert_allclose(x, y, rtol=1e-4, atol=1e-6),
        new_state.params,
        expected,
    )


def test_observation_statistics_follow_the_gradient_steps_that_used_the_actors_ones():
    """normalize_observations: the gradient steps are those of the statistics the
    actors acted with (the params' before the update); the batch's observations are
    merged into them afterwards (`networks.observe`)."""
    config = ppo.PPOConfig(hidden_sizes=(4,), normalize_observations=True)
    agent = ppo.make_agent(config, SPEC)
    state = agent.init(jax.random.PRNGKey(0))
    batch = batch_with_extras(jax.random.PRNGKey(1))
    new_state, _ = agent.update(state, batch)
    optimizer = agents.base.optimizer_of(config)
    stepped, _ = jax.jit(lambda s, b: ppo._update(agent.network, optimizer, config, s, b))(
        state, batch
    )  # the gradient steps alone, with the initial statistics (mean 0, var 1)
    expected = networks.observe(stepped.params, batch.observation)
    close = functools.partial(np.testing.assert_allclose, rtol=1e-5)
    jax.tree.map(close, new_state.params, expected)
    stats = new_state.params[networks.OBS_NORM]
    np.testing.assert_allclose(stats["mean"], np.mean(batch.observation, axis=(0, 1)), rtol=1e-5)
    assert float(stats["count"]) == 12  # T x N = 4 x 3 observations
    assert not np.allclose(stepped.params["value_head"]["w"], state.params["value_head"]["w"])


def test_observation_statistics_stop_where_the_step_size_has_decayed_to_zero():
    """A network that no longer learns keeps the statistics it was trained with: once
    the step size has decayed to 0 (here after the first optimizer step) an update
    leaves the params, statistics included, as they were."""
    config = ppo.PPOConfig(
        hidden_sizes=(4,),
        normalize_observations=True,
        learning_rate_decay_steps=1,
        learning_rate_final=0.0,
    )
    agent = ppo.make_agent(config, SPEC)
    learned, _ = agent.update(
        agent.init(jax.random.PRNGKey(0)), batch_with_extras(jax.random.PRNGKey(1))
    )
    assert float(learned.params[networks.OBS_NORM]["count"]) == 12  # its one learning step
    frozen, _ = agent.update(learned, batch_with_extras(jax.random.PRNGKey(2)))
    jax.tree.map(np.testing.assert_array_equal, frozen.params, learned.params)


@pytest.mark.parametrize("advantage", ["gae", "grpo"])
def test_update_compiles_once(advantage):
    config = ppo.PPOConfig(hidden_sizes=(8,), advantage=advantage, num_epochs=2, num_minibatches=3)
    agent = ppo.make_agent(config, SPEC)
    state = agent.init(jax.random.PRNGKey(0))
    for i in range(3):
        state, metrics = agent.update(state, batch_with_extras(jax.random.PRNGKey(i)))
    assert agent.update._cache_size() == 1
    assert int(state.step) == 3
    assert all(np.isfinite(v) for v in metrics.values())
    assert not np.array_equal(state.key, agent.init(jax.random.PRNGKey(0)).key)  # reshuffles


def test_the_entropy_bonus_decays_by_updates_as_a2cs_does():
    """ppo_slippery8x8's schedule: an update after entropy_decay_steps updates is the
    one a config with the final weight takes, halfway the mean weight's."""
    batch = batch_with_extras(jax.random.PRNGKey(1))

    def update_at(step, **fields):
        agent = ppo.make_agent(ppo.PPOConfig(hidden_sizes=(), **fields), SPEC)
        state = agent.init(jax.random.PRNGKey(0))
        return agent.update(state._replace(step=jnp.int32(step)), batch)[0].params

    decaying = dict(entropy_coef=0.05, entropy_decay_steps=10, entropy_coef_final=0.01)
    for step, weight in ((10, 0.01), (50, 0.01), (5, 0.03), (0, 0.05)):
        jax.tree.map(
            lambda x, y: np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-7),
            update_at(step, **decaying),
            update_at(step, entropy_coef=weight),
        )
    moved = (
        update_at(10, **decaying)["policy_head"]["w"]
        - update_at(10, entropy_coef=0.05)["policy_head"]["w"]
    )
    assert np.abs(moved).max() > 1e-6  # the weight matters to this update
