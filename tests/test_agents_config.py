"""The agents' config dataclasses: every preset keeps the field names, default values
and types it had before the shared fields were grouped (`agents.settings`); the
configs stay frozen, hashable, replaceable, and built by keyword only."""

import dataclasses

import pytest

from distrl import agents

# The presets that are a config class's defaults, one column each in DEFAULTS.
COLUMNS = ("dqn", "r2d2", "a2c", "ppo", "sac", "td3")
_ = None  # the config has no such field
INTS = tuple[int, ...]  # the annotation of hidden_sizes and conv_channels
# field: (its annotated type, its default in each of COLUMNS), as they were on main
DEFAULTS = {
    "activation": (str, ("relu", "relu", "tanh", "tanh", "relu", "relu")),
    "advantage": (str, (_, _, _, "gae", _, _)),
    "burn_in": (int, (_, 8, _, _, _, _)),
    "clip_epsilon": (float, (_, _, _, 0.2, _, _)),
    "clip_pg_rho_threshold": (float, (_, _, 1.0, _, _, _)),
    "clip_rho_threshold": (float, (_, _, 1.0, _, _, _)),
    "clip_value": (bool, (_, _, _, False, _, _)),
    "conv_channels": (INTS, ((16,), (16,), (16,), (16,), (16,), (16,))),
    "conv_kernel": (int, (3, 3, 3, 3, 3, 3)),
    "core": (str, (_, "gru", "none", "none", _, _)),
    "core_size": (int, (_, 64, 128, 128, _, _)),
    "critic_learning_rate": (float, (_, _, _, _, 0.001, 0.0003)),
    "discount": (float, (0.9, 0.99, 0.99, 0.9, 0.99, 0.99)),
    "double_q": (bool, (True, _, _, _, _, _)),
    "entropy_coef": (float, (_, _, 0.05, 0.05, _, _)),
    "entropy_coef_final": (float, (_, _, 0.0, 0.0, _, _)),
    "entropy_decay_steps": (int, (_, _, 0, 0, _, _)),
    "epsilon_decay_steps": (int, (2000, 20000, _, _, _, _)),
    "epsilon_final": (float, (0.1, 0.05, _, _, _, _)),
    "epsilon_init": (float, (1.0, 1.0, _, _, _, _)),
    "exploration_noise": (float, (_, _, _, _, _, 0.1)),
    "gae_lambda": (float, (_, _, 0.95, 0.95, _, _)),
    "hidden_sizes": (INTS, ((64, 64), (64,), (64,), (64,), (256, 256), (256, 256))),
    "huber_delta": (float, (1.0, 1.0, _, _, _, _)),
    "initial_temperature": (float, (_, _, _, _, 1.0, _)),
    "learning_rate": (float, (0.01, 0.001, 0.01, 0.01, 0.0003, 0.0003)),
    "learning_rate_decay_steps": (int, (0, 0, 0, 0, 0, 0)),
    "learning_rate_final": (float, (0.0, 0.0, 0.0, 0.0, 0.0, 0.0)),
    "loss": (str, ("huber", "l2", _, _, _, _)),
    "max_grad_norm": (float, (10.0, 10.0, 1.0, 0.5, 0.0, 0.0)),
    "n_step": (int, (1, 5, _, _, 1, 1)),
    "network": (str, ("mlp", _, _, _, _, _)),
    "noise_clip": (float, (_, _, _, _, _, 0.5)),
    "normalize_advantages": (bool, (_, _, False, False, _, _)),
    "normalize_observations": (bool, (_, _, False, False, _, _)),
    "num_epochs": (int, (_, _, _, 4, _, _)),
    "num_minibatches": (int, (_, _, _, 4, _, _)),
    "optimizer": (str, ("adam", "adam", "adam", "adam", "adam", "adam")),
    "policy_delay": (int, (_, _, _, _, _, 2)),
    "policy_noise": (float, (_, _, _, _, _, 0.2)),
    "priority_eta": (float, (_, 0.9, _, _, _, _)),
    "random_steps": (int, (_, _, _, _, 0, 0)),
    "record_value": (bool, (_, _, False, False, _, _)),
    "rescaling_epsilon": (float, (_, 0.001, _, _, _, _)),
    "shared_torso": (bool, (_, _, False, False, _, _)),
    "target_entropy_scale": (float, (_, _, _, _, 1.0, _)),
    "target_update_period": (int, (25, 100, _, _, _, _)),
    "target_update_tau": (float, (1.0, 1.0, _, _, _, _)),
    "tau": (float, (_, _, _, _, 0.005, 0.005)),
    "temperature_learning_rate": (float, (_, _, _, _, 0.001, _)),
    "torso": (str, ("auto", "auto", "auto", "auto", "auto", "auto")),
    "use_critic": (bool, (_, _, True, _, _, _)),
    "value_coef": (float, (_, _, 0.5, 0.5, _, _)),
    "value_rescaling": (bool, (_, True, _, _, _, _)),
    "vtrace": (bool, (_, _, False, _, _, _)),
}
# What the other presets change of their config class's defaults (its column).
PRESET_CHANGES = {
    "tabular": (
        "dqn",
        {
            "network": "table",
            "optimizer": "sgd",
            "learning_rate": 1.0,
            "max_grad_norm": 0.0,
            "double_q": False,
            "loss": "l2",
            "target_update_period": 1,
        },
    ),
    "reinforce": ("a2c", {"gae_lambda": 1.0, "use_critic": False, "entropy_coef": 0.1}),
    "vtrace": ("a2c", {"gae_lambda": 1.0, "vtrace": True}),
    "grpo": ("ppo", {"advantage": "grpo"}),
}


def wanted_fields(name: str) -> dict:
    """{field: (value, annotated type)} of preset `name` as it was on main."""
    column, changes = PRESET_CHANGES.get(name, (name, {}))
    index = COLUMNS.index(column)
    fields = {k: (v[index], t) for k, (t, v) in DEFAULTS.items() if v[index] is not _}
    return {**fields, **{k: (v, fields[k][1]) for k, v in changes.items()}}


def test_every_preset_is_pinned():
    assert set(agents.PRESETS) == set(COLUMNS) | set(PRESET_CHANGES)


@pytest.mark.parametrize("name", sorted(agents.PRESETS))
def test_every_preset_keeps_its_field_names_values_and_types(name):
    config = agents.make_config(name)
    wanted = wanted_fields(name)
    got = dataclasses.asdict(config)
    assert got == {k: v for k, (v, _) in wanted.items()}
    assert {k: type(v) for k, v in got.items()} == {k: type(v) for k, (v, _) in wanted.items()}
    assert {f.name: f.type for f in dataclasses.fields(config)} == {
        k: t for k, (_, t) in wanted.items()
    }


@pytest.mark.parametrize("name", COLUMNS)
def test_configs_stay_frozen_hashable_replaceable_and_keyword_only(name):
    cls = agents.PRESETS[name][0]
    config = cls()
    assert hash(config) == hash(cls(**dataclasses.asdict(config)))
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.learning_rate = 0.5
    halved = dataclasses.replace(config, learning_rate=config.learning_rate / 2)
    assert halved.learning_rate == config.learning_rate / 2
    assert dataclasses.replace(halved, learning_rate=config.learning_rate) == config
    with pytest.raises(ValueError, match="learning_rate=0.0; need a finite number > 0"):
        dataclasses.replace(config, learning_rate=0.0)
    with pytest.raises(TypeError):  # fields are grouped, so their order is not an API
        cls(*dataclasses.astuple(config))
