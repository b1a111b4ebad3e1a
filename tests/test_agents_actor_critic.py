"""A2C / REINFORCE / V-trace: advantage and loss known answers, gradients, one compile."""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np

from distrl import agents
from distrl.agents import actor_critic as ac
from distrl.agents import advantages as adv_lib
from distrl.agents import ppo
from distrl.types import Transition

GAMMA, LAMBDA = 0.9, 0.8


def np_gae(r, last, env_discount, v_obs, v_next, gamma, lam):
    """GAE from first principles: per episode, bootstrapping unless terminated."""
    adv, acc = np.zeros(len(r)), 0.0
    for t in reversed(range(len(r))):
        bootstrap = 0.0 if env_discount[t] == 0 else v_next[t]
        delta = r[t] + gamma * bootstrap - v_obs[t]
        acc = delta + (0.0 if last[t] else gamma * lam * acc)
        adv[t] = acc
    return adv


def traj_1d(r, last, discount, obs_cells, next_cells, actions, num_cells, extras=None):
    return Transition(
        observation=jax.nn.one_hot(jnp.asarray(obs_cells), num_cells),
        action=jnp.asarray(actions, jnp.int32),
        reward=jnp.asarray(r, jnp.float32),
        discount=jnp.asarray(discount, jnp.float32),
        last=jnp.asarray(last, bool),
        next_observation=jax.nn.one_hot(jnp.asarray(next_cells), num_cells),
        extras=extras or {},
    )


# t=1 is truncated (bootstrap from its final obs), t=2 terminated (no bootstrap).
R = [0.0, 0.5, 1.0, 0.0, -1.0]
LAST = [0, 1, 1, 0, 0]
DISC = [1, 1, 0, 1, 1]
V_OBS = np.array([0.1, 0.2, 0.3, 0.4, 0.5], np.float32)
V_NEXT = np.array([0.2, 0.7, 0.9, 0.5, 0.6], np.float32)  # [0] = V_OBS[1], [3] = V_OBS[4]


def test_gae_trick_known_answer():
    traj = traj_1d(R, LAST, DISC, [0] * 5, [0] * 5, [0] * 5, 2)
    adv, returns = adv_lib.gae(traj, jnp.asarray(V_OBS), jnp.asarray(V_NEXT), GAMMA, LAMBDA)
    expected = np_gae(R, LAST, DISC, V_OBS, V_NEXT, GAMMA, LAMBDA)
    np.testing.assert_allclose(adv, expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(returns, expected + V_OBS, rtol=1e-5, atol=1e-6)
    # The hand numbers for two steps: truncated t=1 bootstraps 0.9 * 0.7, t=2 does not.
    np.testing.assert_allclose(adv[1], 0.5 + 0.9 * 0.7 - 0.2, rtol=1e-6)
    np.testing.assert_allclose(adv[2], 1.0 - 0.3, rtol=1e-6)


def test_vtrace_on_policy_equals_gae_lambda_one():
    traj = traj_1d(R, LAST, DISC, [0] * 5, [0] * 5, [0] * 5, 2)
    zeros = jnp.zeros(5)
    pg_adv, targets = adv_lib.vtrace(
        traj, jnp.asarray(V_OBS), jnp.asarray(V_NEXT), zeros, GAMMA, 1.0, 1.0, 1.0
    )
    expected = np_gae(R, LAST, DISC, V_OBS, V_NEXT, GAMMA, 1.0)
    np.testing.assert_allclose(pg_adv, expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(targets, expected + V_OBS, rtol=1e-5, atol=1e-6)


def test_vtrace_clips_importance_weights():
    """One step: target = v + min(rho, 1) * delta, pg advantage = min(rho, 1) * delta."""
    traj = traj_1d([1.0], [0], [1], [0], [0], [0], 2)
    v, v_next = jnp.array([0.5]), jnp.array([2.0])
    delta = 1.0 + GAMMA * 2.0 - 0.5
    for rho in (0.5, 2.0):
        pg_adv, target = adv_lib.vtrace(
            traj, v, v_next, jnp.log(jnp.array([rho])), GAMMA, 1.0, 1.0, 1.0
        )
        np.testing.assert_allclose(pg_adv, [min(rho, 1.0) * delta], rtol=1e-6)
        np.testing.assert_allclose(target, [0.5 + min(rho, 1.0) * delta], rtol=1e-6)


def linear_params():
    """Linear heads (hidden_sizes=()) on 3 one-hot cells, 2 actions."""
    return {
        "policy_head": {
            "w": jnp.array([[0.5, -0.5], [1.0, 0.0], [0.0, 2.0]]),
            "b": jnp.array([0.1, 0.0]),
        },
        "value_head": {"w": jnp.array([[0.3], [-0.2], [0.6]]), "b": jnp.array([0.05])},
    }


def hand_batch():
    """Two chunks [T=3, N=2] over 3 cells."""
    a = traj_1d([0.0, 1.0, 0.0], [0, 1, 0], [1, 0, 1], [0, 1, 2], [1, 2, 0], [1, 0, 1], 3)
    b = traj_1d([0.0, 0.0, -1.0], [1, 0, 0], [1, 1, 1], [2, 0, 1], [1, 1, 2], [0, 0, 1], 3)
    return jax.tree.map(lambda x, y: jnp.stack([x, y], axis=1), a, b)


def np_forward(params, obs):
    p = jax.tree.map(np.asarray, params)
    logits = obs @ p["policy_head"]["w"] + p["policy_head"]["b"]
    values = (obs @ p["value_head"]["w"] + p["value_head"]["b"])[..., 0]
    log_pi = logits - np.log(np.sum(np.exp(logits), -1, keepdims=True))
    return log_pi, values


def np_a2c_loss(config, params, batch):
    obs, next_obs = np.asarray(batch.observation), np.asarray(batch.next_observation)
    log_pi, v = np_forward(params, obs)  # [T, N, A], [T, N]
    _, v_next = np_forward(params, next_obs)
    if not config.use_critic:
        v, v_next = np.zeros_like(v), np.zeros_like(v_next)
    adv = np.stack(
        [
            np_gae(
                np.asarray(batch.reward[:, n]),
                np.asarray(batch.last[:, n]),
                np.asarray(batch.discount[:, n]),
                v[:, n],
                v_next[:, n],
                config.discount,
                config.gae_lambda,
            )
            for n in range(2)
        ],
        axis=1,
    )
    a = np.asarray(batch.action)
    log_pi_a = np.take_along_axis(log_pi, a[..., None], -1)[..., 0]
    pg = np.mean(-log_pi_a * adv)
    value = 0.5 * np.mean((adv + v - np_forward(params, obs)[1]) ** 2) if config.use_critic else 0.0
    entropy = np.mean(-np.sum(np.exp(log_pi) * log_pi, -1))
    return pg + config.value_coef * value - config.entropy_coef * entropy, adv, log_pi


def test_a2c_loss_known_answer():
    config = ac.ActorCriticConfig(
        hidden_sizes=(), discount=GAMMA, gae_lambda=LAMBDA, value_coef=0.5, entropy_coef=0.1
    )
    agent = ac.make_agent(config, agents.EnvSpec(3, 2))
    loss, metrics = ac.loss_fn(agent.network, config, linear_params(), hand_batch())
    expected, _, _ = np_a2c_loss(config, linear_params(), hand_batch())
    np.testing.assert_allclose(loss, expected, rtol=1e-5)
    assert set(metrics) >= {"loss", "pg_loss", "value_loss", "entropy"}


def test_entropy_weight_decays_linearly_over_updates():
    """entropy_coef 0.1 -> 0.02 over 100 updates: the loss at step k is the known answer
    with the interpolated weight; the update's step drives it."""
    config = ac.ActorCriticConfig(
        hidden_sizes=(),
        discount=GAMMA,
        gae_lambda=LAMBDA,
        entropy_coef=0.1,
        entropy_decay_steps=100,
        entropy_coef_final=0.02,
    )
    agent = ac.make_agent(config, agents.EnvSpec(3, 2))
    for step, weight in ((0, 0.1), (50, 0.06), (100, 0.02), (400, 0.02)):
        loss, _ = ac.loss_fn(agent.network, config, linear_params(), hand_batch(), step)
        fixed = dataclasses.replace(config, entropy_coef=weight, entropy_decay_steps=0)
        expected, _, _ = np_a2c_loss(fixed, linear_params(), hand_batch())
        np.testing.assert_allclose(loss, expected, rtol=1e-5, err_msg=f"step {step}")
    state = agent.init(jax.random.PRNGKey(0))._replace(step=jnp.asarray(100, jnp.int32))
    _, metrics = agent.update(state, hand_batch())
    late = dataclasses.replace(config, entropy_coef=0.02, entropy_decay_steps=0)
    want = ac.loss_fn(agent.network, late, state.params, hand_batch())[0]
    np.testing.assert_allclose(metrics["loss"], want, rtol=1e-5)


def test_reinforce_loss_and_gradient_known_answer():
    """No critic, no entropy: d loss / d policy bias = mean(-(onehot(a) - pi) * G)."""
    config = ac.ActorCriticConfig(
        hidden_sizes=(), discount=GAMMA, gae_lambda=1.0, use_critic=False, entropy_coef=0.0
    )
    agent = ac.make_agent(config, agents.EnvSpec(3, 2))
    batch = hand_batch()
    expected, returns, log_pi = np_a2c_loss(config, linear_params(), batch)
    loss_fn = lambda p: ac.loss_fn(agent.network, config, p, batch)[0]
    np.testing.assert_allclose(loss_fn(linear_params()), expected, rtol=1e-5)
    grads = jax.grad(loss_fn)(linear_params())
    onehot = np.eye(2)[np.asarray(batch.action)]
    d_bias = np.mean(-(onehot - np.exp(log_pi)) * returns[..., None], axis=(0, 1))
    np.testing.assert_allclose(grads["policy_head"]["b"], d_bias, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(grads["value_head"]["w"], 0.0)  # no critic: no value gradient


def loss_only(network, config, params, batch):
    return ac.loss_fn(network, config, params, batch)[0]


def test_mlp_gradients_and_one_compile():
    for config in (
        ac.ActorCriticConfig(hidden_sizes=(8,)),
        ac.ActorCriticConfig(hidden_sizes=(8,), shared_torso=True, vtrace=True),
    ):
        agent = ac.make_agent(config, agents.EnvSpec(3, 2))
        state = agent.init(jax.random.PRNGKey(0))
        batch = hand_batch()
        batch = batch._replace(extras={"log_prob": jnp.full((3, 2), -0.7)})
        grads = jax.grad(functools.partial(loss_only, agent.network, config, batch=batch))(
            state.params
        )
        assert all(np.all(np.isfinite(g)) and np.any(g != 0) for g in jax.tree.leaves(grads))
        for i in range(3):
            state, metrics = agent.update(state, batch._replace(reward=batch.reward + i))
        assert agent.update._cache_size() == 1
        assert int(state.step) == 3 and np.isfinite(metrics["loss"])


def test_policy_samples_and_extras():
    agent = ac.make_agent(ac.ActorCriticConfig(hidden_sizes=()), agents.EnvSpec(3, 2))
    params = linear_params()
    obs = jnp.tile(jnp.eye(3)[2:], (4000, 1))  # cell 2: logits [0.1, 2.0]
    actions, extras = jax.jit(agent.policy)(params, jax.random.PRNGKey(0), obs, 0.3)
    assert actions.shape == (4000,) and actions.dtype == jnp.int32
    p1 = 1.0 / (1.0 + np.exp(0.1 - 2.0))
    np.testing.assert_allclose(np.mean(actions == 1), p1, atol=0.03)
    log_pi, values = np_forward(params, np.asarray(obs[:1]))
    np.testing.assert_allclose(extras["log_prob"][actions == 1][:1], log_pi[0, 1:], rtol=1e-5)
    assert set(extras) == {"log_prob"}  # no learner of A2C's reads V(s) at acting time
    clipping = ppo.make_agent(ppo.PPOConfig(hidden_sizes=(), clip_value=True), agents.EnvSpec(3, 2))
    _, extras = jax.jit(clipping.policy)(params, jax.random.PRNGKey(0), obs, 0.3)
    np.testing.assert_allclose(extras["value"], values[0], rtol=1e-5)  # PPO's clip reads it
    np.testing.assert_array_equal(agent.greedy(params, jnp.eye(3)), [0, 0, 1])
    np.testing.assert_allclose(agent.value(params, jnp.eye(3)), [0.35, -0.15, 0.65], rtol=1e-5)
    assert agent.epsilon(123) == 0.0 and agent.config.pipeline is agents.PipelineKind.CHUNKS
