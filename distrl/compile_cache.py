"""JAX's persistent compilation cache, turned on by distrl's entry points.

Every node process compiles the same rollout, update and evaluation functions, and on a
small machine those compiles dominate start-up (the cache's paragraph in
docs/decisions.md, "Checkpoints come in rounds, and a resume pairs them"). `enable` is
called by the entry points (`cli.run`: launch/train.py and `python -m distrl.local`; the
benchmarks; the test suite; the Ray node host), never by importing distrl. It sets JAX's
environment variables, so the node processes a launcher starts inherit the cache, and
updates JAX's config when JAX is already imported. Settings a user exported win.
"""

import os
import sys

ENV = "DISTRL_COMPILATION_CACHE"  # the cache directory, or "off"
DEFAULT_DIR = os.path.join(os.path.expanduser("~"), ".cache", "distrl", "jax")
# JAX evicts the least recently used entries beyond this (the whole test suite and the
# benchmarks together fill far less).
MAX_BYTES = 1 << 30


def settings(path: str) -> dict:
    """JAX config names and values of a cache in `path`, bounded to MAX_BYTES."""
    return {
        "jax_compilation_cache_dir": path,
        "jax_compilation_cache_max_size": MAX_BYTES,
        "jax_persistent_cache_min_compile_time_secs": 0.0,
        "jax_persistent_cache_min_entry_size_bytes": 0,
    }


def enable() -> str | None:
    """Turn the cache on for this process and its children; its directory, or None
    when $DISTRL_COMPILATION_CACHE is "off"."""
    path = os.environ.get(ENV) or DEFAULT_DIR
    if path == "off":
        return None
    for name, value in settings(path).items():
        if name.upper() in os.environ:
            continue  # the user's own setting
        os.environ[name.upper()] = str(value)
        if "jax" in sys.modules:
            sys.modules["jax"].config.update(name, value)
    return os.environ["JAX_COMPILATION_CACHE_DIR"]
