"""A user's own JAX environment by name (`config.env.name='module:factory'`, keyword
arguments from `config.env.kwargs`), and the return target any env can stop on: built
from the config, saved and reloaded, refused by name when it cannot be built, trained
to a confirmed mean return in the single-process trainer and under test_mt, whose
result.json reports only what the env has."""

import json
import os
import pathlib
import shlex

import numpy as np
import pytest
from conftest import drawing_plots, load_config
from test_gymnax_env import _user_config as _gymnax_user_config

from distrl import config as config_lib
from distrl import experiment as experiment_lib
from distrl import local, metrics
from distrl.program import launcher as program
from distrl.records import results
from tests.user_envs import Contexts  # the module as its config name imports it

NAME = "tests.user_envs:make_contexts"


def _contexts_config(algorithm: str = "ppo", target_return: float = 3.5):
    """PPO on 3 contexts x 4 steps (best return 4), stopping at a confirmed return."""
    config = load_config(algorithm)
    config.env.update(dict(name=NAME, kwargs='{"contexts": 3, "length": 4}'))
    config.evaluator.update(
        dict(target_success=0.0, target_return=target_return, num_envs=200, confirm_envs=2_000)
    )
    config.agent.hidden_sizes = (32,)
    config.budget.update(dict(env_steps=400_000, seconds=240.0))
    return config


def test_the_factory_builds_the_env_and_its_name_survives_config_json():
    config = _contexts_config()
    assert experiment_lib.Experiment(config).env == Contexts(3, 4)
    saved = json.loads(json.dumps(config.to_dict()))  # as config.json holds it
    again = config_lib.from_dict(saved)
    assert (again.env.name, again.env.kwargs) == (NAME, '{"contexts": 3, "length": 4}')
    assert again.evaluator.target_return == 3.5
    assert experiment_lib.Experiment(again).env == Contexts(3, 4)
    experiment_lib.make(again)
    # A config saved before these fields existed is a gridworld run without a return target.
    flat = config_lib.flatten(load_config("dqn").to_dict())
    for key in ("env.name", "env.kwargs", "evaluator.target_return"):
        del flat[key]
    older = config_lib.from_dict(config_lib._nest(flat))
    assert older.env.name == "gridworld" and older.evaluator.target_return == 0.0
    assert experiment_lib.Experiment(older).env.spec.observation_shape == (16,)


@pytest.mark.parametrize(
    "name, kwargs, message",
    [
        ("no_such_module_xyz:make", "{}", "cannot import no_such_module_xyz"),
        ("tests.user_envs:missing", "{}", "module tests.user_envs has no attribute 'missing'"),
        ("tests.user_envs:NOT_CALLABLE", "{}", "NOT_CALLABLE in tests.user_envs is a int"),
        ("tests.user_envs:raising", '{"x": 1}', "the factory raised ValueError: no such setting"),
        ("tests.user_envs:not_an_env", "{}", "returned a dict, not an environment"),
        ("tests.user_envs:unhashable", "{}", "returned an unhashable _Unhashable"),
        (NAME, '{"colours": 2}', "raised TypeError: make_contexts() got an unexpected keyword"),
        (NAME, "[3, 4]", "need a JSON object of keyword arguments"),
        (NAME, "{contexts: 3}", "not valid JSON"),
        ("cartpole", "{}", "need 'module.path:factory'"),
    ],
)
def test_a_bad_env_name_is_a_config_error_naming_it(name, kwargs, message):
    config = _contexts_config()
    config.env.update(dict(name=name, kwargs=kwargs))
    with pytest.raises(config_lib.ConfigError, match=f"config.env.name='{name}'") as err:
        experiment_lib.make(config)
    assert message in str(err.value)


@pytest.mark.parametrize("kwargs", ['{"sides": 3}', "notjson"])
def test_kwargs_for_the_gridworld_are_refused(kwargs):
    """The gridworld is built from env.map and its siblings: keyword arguments meant for
    a factory env would otherwise be ignored without a word."""
    config = config_lib.base_config("ppo")
    config.env.kwargs = kwargs
    with pytest.raises(config_lib.ConfigError, match="config.env.kwargs=.*the gridworld takes"):
        experiment_lib.make(config)


def test_a_target_the_env_cannot_score_names_the_return_target_as_the_way():
    config = _contexts_config()
    config.evaluator.target_success = 1.0
    with pytest.raises(config_lib.ConfigError, match="no success signal"):
        experiment_lib.make(config)
    config.evaluator.update(dict(target_success=0.0, target_return=0.0))
    config.budget.update(dict(env_steps=0, seconds=0.0))
    with pytest.raises(config_lib.ConfigError, match="sets no target: the run would never stop"):
        experiment_lib.make(config)


def test_the_single_process_trainer_stops_on_a_confirmed_return():
    config = _contexts_config()
    result = local.train(config)
    assert result.solved, result._replace(params=None)
    assert result.return_low >= 3.5 and result.return_high >= result.mean_return >= 3.5
    assert result.eval_episodes == 2_000 and result.env_steps < 400_000
    assert not result.has_success and result.exact is None and result.report == ""
    assert result.target_return == 3.5 and result.target == 0.0


@pytest.mark.slow
def test_mt_run_on_a_user_env_reports_the_return_only(tmp_path):
    config = _contexts_config()
    config.run_dir = str(tmp_path / "run")
    with drawing_plots():  # the curves only: no policy picture for a continuous env
        result, out_dir = program.run(config, "test_mt")
    assert result["stop_reason"] == "target_reached", result
    ev = result["evaluation"]
    assert ev["return_low"] >= 3.5 and ev["episodes"] == 2_000
    assert not any(k.startswith("success") for k in ev), ev
    assert result["exact"] is None and "grids" not in result and "map" not in result
    with open(os.path.join(out_dir, "result.json")) as f:
        assert json.load(f)["evaluation"] == ev
    rows = metrics.read_csv(metrics.csv_path(out_dir, "evaluator"))
    assert "success_rate" not in rows and np.all(rows["return_low"] <= rows["mean_return"])
    summary = results.summary(result, out_dir)
    assert "mean return +" in summary and "(95%, 2000 episodes)" in summary
    assert "success" not in summary
    plots = os.listdir(os.path.join(out_dir, "plots"))
    assert "curves.png" in plots and "policy.png" not in plots


@pytest.mark.slow
def test_mt_run_on_a_users_gymnax_pair(tmp_path):
    """The distributed program on a user's gymnax-style pair (tests/test_gymnax_env.py):
    every node makes the env again by its factory's name."""
    config = _gymnax_user_config("make_pair", '{"length": 4}')
    config.run_dir = str(tmp_path / "run")
    result, _ = program.run(config, "test_mt")
    assert result["stop_reason"] == "target_reached", result
    assert result["evaluation"]["return_low"] >= 3.5 and result["evaluation"]["episodes"] == 2_000


def test_the_readme_example_trains_to_its_return_target(tmp_path, monkeypatch):
    """README's "Your own environment": its module and its command's settings."""
    readme = (pathlib.Path(__file__).parent.parent / "README.md").read_text()
    section = readme.split("## Your own environment")[1].split("\n## ")[0]
    code = section.split("```python\n")[1].split("```")[0]
    (tmp_path / "mypkg").mkdir()
    (tmp_path / "mypkg" / "__init__.py").write_text("")
    (tmp_path / "mypkg" / "envs.py").write_text(code)
    monkeypatch.syspath_prepend(str(tmp_path))
    config = load_config("ppo")
    command = shlex.split(section.split("```sh\n")[1].split("```")[0].replace("\\\n", " "))
    assert "--config=configs/ppo.py" in command
    for flag in (f for f in command if f.startswith("--config.")):
        key, value = flag.removeprefix("--config.").split("=", 1)
        section_name, field = key.split(".")
        config[section_name][field] = type(config[section_name][field])(value)
    assert config.env.name == "mypkg.envs:make" and config.evaluator.target_return == 9.5
    result = local.train(config)
    assert result.solved and result.return_low >= 9.5 and not result.has_success
