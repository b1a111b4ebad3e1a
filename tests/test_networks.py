"""Networks: shapes, parameter layout, the table network, shared vs separate torsos, and
the recurrent networks' unroll against their steps."""

import functools

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from distrl import networks, spaces
from distrl.agents import r2d2, recurrent

KEY = jax.random.PRNGKey(0)
O, A = 16, 4


def shapes(params):
    return jax.tree.map(jnp.shape, params)


def test_q_network_shapes():
    net = networks.make_q_network(networks.Torso((32, 16)), A)
    params = jax.jit(net.init)(KEY, jnp.zeros((O,)))
    assert shapes(params) == {
        "torso_0": {"w": (O, 32), "b": (32,)},
        "torso_1": {"w": (32, 16), "b": (16,)},
        "q_head": {"w": (16, A), "b": (A,)},
    }
    assert net.apply(params, jnp.zeros((O,))).shape == (A,)
    assert net.apply(params, jnp.zeros((7, O))).shape == (7, A)
    assert net.apply(params, jnp.zeros((3, 5, O))).shape == (3, 5, A)


def test_table_network_is_the_q_table():
    net = networks.make_table_network(A)
    params = jax.jit(net.init)(KEY, jnp.zeros((O,)))
    assert shapes(params) == {"table": {"w": (O, A)}}
    np.testing.assert_array_equal(params["table"]["w"], 0.0)  # tabular Q starts at 0
    table = jnp.arange(O * A, dtype=jnp.float32).reshape(O, A)
    q = net.apply({"table": {"w": table}}, jnp.eye(O))
    np.testing.assert_array_equal(q, table)  # row s of the table for one-hot s
    assert networks.make_dqn_network("table", networks.Torso((64,)), A).apply(
        params, jnp.eye(O)
    ).shape == (O, A)


@pytest.mark.parametrize("shared", [False, True])
def test_actor_critic_shapes(shared):
    net = networks.make_actor_critic_network(networks.Torso((8,), "tanh"), A, shared_torso=shared)
    params = jax.jit(net.init)(KEY, jnp.zeros((O,)))
    torsos = {"torso_0"} if shared else {"policy_torso_0", "value_torso_0"}
    assert set(params) == torsos | {"policy_head", "value_head"}
    logits, value = net.apply(params, jnp.zeros((5, O)))
    assert logits.shape == (5, A) and value.shape == (5,)
    logits, value = net.apply(params, jnp.zeros((O,)))
    assert logits.shape == (A,) and value.shape == ()


def test_linear_actor_critic_without_hidden_layers():
    net = networks.make_actor_critic_network(networks.Torso((), "tanh"), A)
    params = jax.jit(net.init)(KEY, jnp.zeros((O,)))
    assert shapes(params) == {
        "policy_head": {"w": (O, A), "b": (A,)},
        "value_head": {"w": (O, 1), "b": (1,)},
    }
    logits, _ = net.apply(params, jnp.eye(O))
    assert float(jnp.max(jnp.abs(logits))) < 0.1  # small head init: near-uniform policy


def test_gradients_flow_to_every_parameter():
    net = networks.make_actor_critic_network(networks.Torso((8, 8), "tanh"), A, shared_torso=False)
    params = jax.jit(net.init)(KEY, jnp.zeros((O,)))
    _assert_gradients_reach_every_parameter(net, params, jax.nn.one_hot(jnp.arange(4), O))


def _assert_gradients_reach_every_parameter(net, params, obs):
    """An actor-critic loss of both heads has a nonzero gradient for every parameter."""

    def loss(p):
        logits, value = net.apply(p, obs)
        return jnp.sum(jax.nn.log_softmax(logits)[:, 0]) + jnp.sum(value)

    grads = jax.jit(jax.grad(loss))(params)
    assert all(np.any(g != 0) for g in jax.tree.leaves(grads))


def test_bad_names_raise():
    with pytest.raises(ValueError):
        networks.make_dqn_network("conv", networks.Torso((8,)), A)
    with pytest.raises(ValueError):
        networks.make_q_network(networks.Torso((8,), "swish"), A).init(KEY, jnp.zeros((O,)))


IMAGE = (10, 10, 3)  # MinAtar-like [H, W, C]


@pytest.mark.parametrize("dtype", [jnp.uint8, jnp.bool_, jnp.float32])
def test_conv_q_network_shapes_and_gradients(dtype):
    net = networks.make_q_network(networks.Torso((32,), "relu", 3, (8, 4), 3), A)
    params = jax.jit(net.init)(KEY, jnp.zeros(IMAGE))
    assert shapes(params) == {
        "torso_conv_0": {"w": (3, 3, 3, 8), "b": (8,)},
        "torso_conv_1": {"w": (3, 3, 8, 4), "b": (4,)},
        "torso_0": {"w": (10 * 10 * 4, 32), "b": (32,)},  # SAME padding keeps 10x10
        "q_head": {"w": (32, A), "b": (A,)},
    }
    obs = jax.random.bernoulli(KEY, 0.3, (5, *IMAGE)).astype(dtype)
    assert net.apply(params, obs).shape == (5, A)
    assert net.apply(params, obs[0]).shape == (A,)
    q = net.apply(params, jnp.stack([obs, obs]))  # [2, 5, *IMAGE]: leading dims are free
    np.testing.assert_allclose(q[1], net.apply(params, obs), rtol=1e-5)
    grads = jax.jit(jax.grad(lambda p: jnp.sum(net.apply(p, obs) ** 2)))(params)
    assert all(np.any(g != 0) for g in jax.tree.leaves(grads))


@pytest.mark.parametrize("shared", [False, True])
def test_conv_actor_critic_shapes_and_gradients(shared):
    torso = networks.Torso((8,), "tanh", obs_ndim=3, conv_channels=(4,), conv_kernel=2)
    net = networks.make_actor_critic_network(torso, A, shared_torso=shared)
    params = jax.jit(net.init)(KEY, jnp.zeros(IMAGE))
    names = ["torso"] if shared else ["policy_torso", "value_torso"]
    for name in names:  # separate torsos each have their own conv layer
        assert shapes(params[f"{name}_conv_0"]) == {"w": (2, 2, 3, 4), "b": (4,)}
        assert shapes(params[f"{name}_0"]) == {"w": (400, 8), "b": (8,)}
    obs = jax.random.bernoulli(KEY, 0.3, (6, *IMAGE))  # bool, as MinAtar's
    logits, value = net.apply(params, obs)
    assert logits.shape == (6, A) and value.shape == (6,)
    _assert_gradients_reach_every_parameter(net, params, obs)


def test_torso_kind_auto_is_conv_on_images_only():
    assert networks.torso_kind("auto", (10, 10, 4)) == "conv"
    assert networks.torso_kind("auto", (16,)) == "mlp"
    assert networks.torso_kind("auto", (2, 3)) == "mlp"
    assert networks.torso_kind("mlp", (10, 10, 4)) == "mlp"
    assert networks.torso_kind("conv", (10, 10, 4)) == "conv"
    with pytest.raises(ValueError, match=r"torso='conv' needs .* shape is \(16,\)"):
        networks.torso_kind("conv", (16,))


@pytest.mark.parametrize("algorithm", ["dqn", "ppo", "a2c"])
def test_auto_torso_keeps_the_gridworld_mlp(algorithm):
    """ "auto" on the gridworld's one-hot vectors is the MLP of "mlp": same names, same init."""
    from distrl import agents
    from distrl.agents.base import EnvSpec

    spec = EnvSpec(obs_size=O, num_actions=A)
    auto = agents.make_agent(agents.make_config(algorithm), spec).init(KEY).params
    mlp = agents.make_agent(agents.make_config(algorithm, torso="mlp"), spec).init(KEY).params
    assert not any("conv" in name for name in auto)
    assert jax.tree.structure(auto) == jax.tree.structure(mlp)
    jax.tree.map(np.testing.assert_array_equal, auto, mlp)
    image = EnvSpec(obs_size=400, num_actions=A, observation_shape=IMAGE)
    conv = agents.make_agent(agents.make_config(algorithm), image).init(KEY).params
    assert any(name.endswith("conv_0") for name in conv)


@pytest.mark.parametrize("kernel", [2, 3])
def test_same_conv_is_haikus_conv2d(kernel):
    """The im2col conv (fast inside lax.scan on XLA:CPU) has hk.Conv2D's params, init and
    outputs: stride 1, SAME padding (an even kernel padded as XLA pads it)."""
    ours = hk.without_apply_rng(hk.transform(lambda x: networks.SameConv2D(5, kernel, "c")(x)))
    theirs = hk.without_apply_rng(hk.transform(lambda x: hk.Conv2D(5, kernel, name="c")(x)))
    x = jax.random.normal(KEY, (4, *IMAGE))
    params = ours.init(KEY, x)
    jax.tree.map(np.testing.assert_array_equal, params, theirs.init(KEY, x))
    np.testing.assert_allclose(ours.apply(params, x), theirs.apply(params, x), atol=1e-5)


def test_observation_norm_standardises_by_the_params_statistics_and_clips():
    torso = networks.Torso((8,), "tanh", normalize_observations=True)
    net = networks.make_actor_critic_network(torso, A)
    params = net.init(KEY, jnp.zeros((O,)))
    stats = params[networks.OBS_NORM]  # from mean 0, var 1, count 0
    assert shapes(stats) == {"mean": (O,), "var": (O,), "count": ()}
    assert float(stats["count"]) == 0 and float(jnp.sum(stats["var"])) == O
    norm = hk.without_apply_rng(hk.transform(lambda x: networks.ObservationNorm(1)(x)))
    custom = {networks.OBS_NORM: {"mean": jnp.full((O,), 2.0), "var": jnp.full((O,), 4.0)}}
    custom[networks.OBS_NORM]["count"] = jnp.float32(5)
    out = norm.apply(custom, jnp.stack([jnp.full((O,), 3.0), jnp.full((O,), 1e3)]))
    np.testing.assert_allclose(out[0], 0.5, rtol=1e-5)  # (3 - 2) / sqrt(4)
    np.testing.assert_allclose(out[1], networks.OBS_CLIP)  # clipped
    # no gradient reaches the statistics; the layers behind them get one
    grads = jax.grad(lambda p: jnp.sum(net.apply(p, jnp.ones((3, O)))[1]))(params)
    assert not np.any(grads[networks.OBS_NORM]["mean"]) and np.any(grads["value_head"]["w"])


def test_observe_merges_batches_into_the_mean_and_variance_of_them_all():
    torso = networks.Torso((), normalize_observations=True)
    params = networks.make_actor_critic_network(torso, A).init(KEY, jnp.zeros((O,)))
    rng = np.random.default_rng(0)
    first, second = rng.normal(3.0, 2.0, (4, 5, O)), rng.normal(-1.0, 0.5, (7, O))
    params = networks.observe(networks.observe(params, first), second)
    both = np.concatenate([first.reshape(-1, O), second])
    stats = params[networks.OBS_NORM]
    np.testing.assert_allclose(stats["mean"], both.mean(0), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(stats["var"], both.var(0), rtol=1e-4)
    assert float(stats["count"]) == 27
    plain = networks.make_actor_critic_network(networks.Torso(()), A).init(KEY, jnp.zeros((O,)))
    assert networks.observe(plain, first) is plain  # no statistics: nothing to merge


def _gru_reference(torso, heads, names):
    """A recurrent network as written with hk.GRU, one step: what the unrolls must give."""

    def forward(obs, state):
        obs = networks._input(torso, obs)
        new = []
        for name, h in zip(names, state):
            new.append(hk.GRU(8, name=f"{name}_gru")(networks._torso(torso, name)(obs), h)[1])
        return heads(new), tuple(new)

    return hk.without_apply_rng(hk.transform(forward))


def _recurrent_nets():
    """(name, the network, its hk.GRU reference): R2D2's Q network and the recurrent
    actor-critics, separate torsos with discrete actions and one torso with a Box."""
    torso = networks.torso_of(r2d2.R2D2Config(hidden_sizes=(8,)), (3,))
    box = spaces.box((2,), -1.0, 1.0)

    def critic(actions):
        def heads(hidden):
            policy = networks._policy_head(actions, hidden[0])
            return policy, hk.Linear(1, name="value_head")(hidden[-1])[..., 0]

        return heads

    q_head = lambda hidden: hk.Linear(2, name="q_head")(hidden[0])  # noqa: E731
    two = ("policy_torso", "value_torso")
    return [
        ("q", networks.make_recurrent_q(torso, 2, 8), _gru_reference(torso, q_head, ("torso",))),
        (
            "actor-critic",
            networks.make_recurrent_actor_critic(torso, 2, False, 8),
            _gru_reference(torso, critic(2), two),
        ),
        (
            "actor-critic, one torso, Box",
            networks.make_recurrent_actor_critic(torso, box, True, 8),
            _gru_reference(torso, critic(box), ("torso",)),
        ),
    ]


@pytest.mark.parametrize("index", range(3))
def test_the_networks_unroll_is_its_steps_run_in_a_scan(index):
    """A recurrent network's unroll (torsos, GRU input projections and heads batched over
    [T, N] outside the scan) gives the numbers and gradient of its one-step apply scanned
    with resets (`recurrent.unroll`'s generic form), and its params are hk.GRU's network's:
    the same names, shapes and initial values, so earlier checkpoints load."""
    name, net, old = _recurrent_nets()[index]
    cores = 1 if name != "actor-critic" else 2
    state = tuple(jnp.zeros((4, 8)) for _ in range(cores))
    params = net.init(jax.random.PRNGKey(3), jnp.zeros((4, 3)), state)
    old_params = old.init(jax.random.PRNGKey(3), jnp.zeros((4, 3)), state)
    assert jax.tree.map(np.shape, params) == jax.tree.map(np.shape, old_params), name
    for a, b in zip(jax.tree.leaves(params), jax.tree.leaves(old_params)):
        np.testing.assert_array_equal(a, b)

    rng = np.random.default_rng(1)
    obs, next_obs = (jnp.asarray(rng.normal(size=(6, 4, 3)), jnp.float32) for _ in range(2))
    last = jnp.asarray(rng.random((6, 4)) < 0.3)
    start = tuple(jnp.asarray(rng.normal(size=(4, 8)), jnp.float32) for _ in range(cores))
    generic = recurrent.unroll_of(old)  # old.apply scanned: hk.Transformed has no unroll

    def close(a, b, rtol=1e-5, atol=1e-6):
        for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
            np.testing.assert_allclose(x, y, rtol=rtol, atol=atol)

    close(
        net.unroll(params, start, obs, last, next_obs), generic(params, start, obs, last, next_obs)
    )
    close(net.unroll(params, start, obs, last)[:2], generic(params, start, obs, last)[:2])

    def loss(run, p):
        _, outs, nexts = run(p, start, obs, last, next_obs)
        return sum(jnp.sum(jnp.sin(x)) for x in jax.tree.leaves((outs, nexts)))

    grads = jax.grad(functools.partial(loss, net.unroll))(params)
    close(grads, jax.grad(functools.partial(loss, generic))(params), rtol=1e-4, atol=1e-5)
