"""Agents in Box action spaces: the squashed Gaussian head (A2C, PPO, SAC), SAC's and
TD3's updates on a tiny problem, and the entropy temperature's direction."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from distrl import agents, envs, networks, spaces
from distrl.agents import distributions as dist
from distrl.agents import ppo, sac, td3
from distrl.types import QTransition

BOX = spaces.box((2,), -1.0, 1.0)
SPEC = envs.EnvSpec((3,), "float32", 0, 5, BOX)


def test_squashed_gaussian_log_prob_matches_the_change_of_variables():
    """log pi(a) for a = tanh(u), u ~ N(mean, std): the Gaussian density of u divided
    by |da/du| = 1 - tanh(u)^2, per element, summed; computed here in float64."""
    mean, log_std = np.array([0.3, -1.2]), np.array([-0.5, 0.4])
    u = np.array([0.7, -2.0])
    std = np.exp(log_std)
    normal = -0.5 * ((u - mean) / std) ** 2 - np.log(std) - 0.5 * np.log(2 * np.pi)
    want = np.sum(normal - np.log(1.0 - np.tanh(u) ** 2))
    out = networks.GaussianParams(jnp.asarray(mean, jnp.float32), jnp.asarray(log_std, jnp.float32))
    got = dist.log_prob(out, jnp.tanh(jnp.asarray(u, jnp.float32)))
    np.testing.assert_allclose(got, want, rtol=1e-4)


def test_a_sample_reports_the_log_prob_of_the_action_it_gives():
    out = networks.GaussianParams(jnp.zeros((64, 2)), jnp.full((64, 2), -0.3))
    actions, log_probs = dist.sample(jax.random.PRNGKey(0), out)
    assert actions.shape == (64, 2) and jnp.all(jnp.abs(actions) < 1.0)
    np.testing.assert_allclose(dist.log_prob(out, actions), log_probs, rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(dist.mode(out), 0.0)


def test_ppo_acts_and_learns_in_a_box():
    """PPO's Gaussian head: actions [B, D] in (-1, 1) with their log-probs; one update on
    a batch where the actions near 0.5 earn more moves the mean towards 0.5."""
    agent = agents.make_agent(ppo.PPOConfig(hidden_sizes=(8,), num_minibatches=1), SPEC)
    state = agent.init(jax.random.PRNGKey(0))
    obs = jnp.ones((32, 3))
    actions, extras = agent.policy(state.params, jax.random.PRNGKey(1), obs, 0.0)
    assert actions.shape == (32, 2) and extras["log_prob"].shape == (32,)
    reward = -jnp.sum(jnp.square(actions - 0.5), axis=-1)
    batch = _chunk(obs, actions, reward, extras)
    before = agent.greedy(state.params, obs[:1])
    for _ in range(5):
        state, metrics = agent.update(state, batch)
    after = agent.greedy(state.params, obs[:1])
    assert jnp.all(jnp.isfinite(metrics["loss"]))
    assert jnp.sum(jnp.square(after - 0.5)) < jnp.sum(jnp.square(before - 0.5))


def _chunk(obs, actions, reward, extras):
    from distrl.types import Transition  # noqa: PLC0415

    lead = lambda x: x[None]  # noqa: E731 - a chunk of T = 1 step
    n = obs.shape[0]
    return Transition(
        lead(obs),
        lead(actions),
        lead(reward),
        lead(jnp.zeros(n)),  # every step terminates: the return is the reward
        lead(jnp.ones(n, bool)),
        lead(obs),
        jax.tree.map(lead, extras),
    )


def _bandit_batch(agent, params, key, n=64):
    """Transitions of a one-step bandit whose best action is 0.5 in every element."""
    obs = jnp.ones((n, 3))
    actions, _ = agent.policy(params, key, obs, 0.0)
    reward = -jnp.sum(jnp.square(actions - 0.5), axis=-1)
    return QTransition(obs, actions, reward, jnp.zeros(n), obs)


@pytest.mark.parametrize(
    ("algorithm", "overrides"),
    [("sac", {"initial_temperature": 0.01}), ("td3", {"critic_learning_rate": 3e-3})],
)
def test_replay_agents_learn_a_one_step_bandit(algorithm, overrides):
    """Its greedy action moves towards the best one, and its critic loss falls."""
    config = agents.make_config(algorithm, hidden_sizes=(32,), learning_rate=3e-3, **overrides)
    agent = agents.make_agent(config, SPEC)
    state = agent.init(jax.random.PRNGKey(0))
    obs = jnp.ones((1, 3))
    before = float(jnp.sum(jnp.square(agent.greedy(state.params, obs) - 0.5)))
    first = None
    for i in range(300):
        batch = _bandit_batch(agent, state.params, jax.random.PRNGKey(i))
        state, metrics = agent.update(state, batch)
        first = float(metrics["critic_loss"]) if first is None else first
        assert metrics["priorities"].shape == (64,)
    after = float(jnp.sum(jnp.square(agent.greedy(state.params, obs) - 0.5)))
    assert after < 0.25 * before, (before, after)
    assert float(metrics["critic_loss"]) < first


def test_the_temperature_moves_towards_the_target_entropy():
    """Entropy (-log pi) above the target: alpha falls; below it: alpha rises."""
    target = -2.0
    high_entropy = jnp.full((8,), 1.0)  # log pi = 1 -> entropy -1 > -2
    low_entropy = jnp.full((8,), 5.0)  # entropy -5 < -2
    grad = jax.grad(sac.temperature_loss)
    assert grad(jnp.float32(0.0), high_entropy, target) > 0  # a step lowers log alpha
    assert grad(jnp.float32(0.0), low_entropy, target) < 0

    # in the agent: a target far below any entropy the policy has lowers alpha, one
    # far above raises it
    for scale, falls in ((50.0, True), (-50.0, False)):
        config = sac.SACConfig(
            hidden_sizes=(16,), temperature_learning_rate=0.05, target_entropy_scale=scale
        )
        agent = agents.make_agent(config, SPEC)
        state = agent.init(jax.random.PRNGKey(0))
        for i in range(10):
            batch = _bandit_batch(agent, state.params, jax.random.PRNGKey(i))
            state, metrics = agent.update(state, batch)
        assert (float(metrics["temperature"]) < config.initial_temperature) == falls


def test_td3_moves_its_actor_and_targets_every_policy_delay_updates():
    config = td3.TD3Config(hidden_sizes=(8,), policy_delay=3)
    agent = agents.make_agent(config, SPEC)
    state = agent.init(jax.random.PRNGKey(0))
    actor_moved = []
    for i in range(6):
        new, _ = agent.update(state, _bandit_batch(agent, state.params, jax.random.PRNGKey(i)))
        changed = jax.tree.map(
            lambda a, b: bool(jnp.any(a != b)), new.params.actor, state.params.actor
        )
        actor_moved.append(any(jax.tree.leaves(changed)))
        state = new
    assert actor_moved == [False, False, True, False, False, True]


@pytest.mark.parametrize("algorithm", ["sac", "td3"])
def test_a_random_start_acts_uniformly_for_its_env_steps_then_as_the_policy(algorithm):
    """random_steps: exploration 1 before it (uniform actions over [-1, 1]^D, whatever
    the policy would do), 0 from it on (the policy's own actions, drawn as without it)."""
    agent = agents.make_agent(agents.make_config(algorithm, random_steps=1000), SPEC)
    plain = agents.make_agent(agents.make_config(algorithm), SPEC)
    params = agent.init(jax.random.PRNGKey(0)).params
    assert [float(agent.epsilon(s)) for s in (0, 999, 1000, 10**6)] == [1.0, 1.0, 0.0, 0.0]
    assert float(plain.epsilon(0)) == 0.0
    obs, key = jnp.ones((4096, 3)), jax.random.PRNGKey(1)
    act = jax.jit(agent.policy)
    started, _ = act(params, key, obs, agent.epsilon(0))
    assert np.all(np.abs(started) <= 1.0)
    # uniform: each element's mean near 0 and variance near 1/3, unlike the policy's
    # (every observation alike, so its actions gather around one mean)
    np.testing.assert_allclose(np.mean(started, axis=0), 0.0, atol=0.05)
    np.testing.assert_allclose(np.var(started, axis=0), 1 / 3, atol=0.03)
    own, _ = act(params, key, obs, agent.epsilon(1000))
    mine = plain.policy(params, key, obs, 0.0)[0]  # unjitted: equal to float rounding
    np.testing.assert_allclose(own, mine, rtol=1e-5, atol=1e-6)
    assert np.all(np.var(own, axis=0) < 0.2)


def test_a_negative_random_start_is_refused():
    for algorithm in ("sac", "td3"):
        with pytest.raises(ValueError, match="random_steps"):
            agents.make_config(algorithm, random_steps=-1)


def test_box_agents_refuse_discrete_actions():
    for algorithm in ("sac", "td3"):
        with pytest.raises(ValueError, match="acts in Box action spaces"):
            agents.check_actions(agents.make_config(algorithm), envs.EnvSpec((3,), "float32", 2, 5))
