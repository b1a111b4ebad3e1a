"""Shared test helpers: configs loaded from configs/*.py, and a clean CPU setup."""

import importlib.util
import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent


def load_config(name: str):
    """The ml_collections config of configs/<name>.py, as the launcher loads it."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "configs" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.get_config()


@pytest.fixture
def run_dir(tmp_path):
    return str(tmp_path / "run")


os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
