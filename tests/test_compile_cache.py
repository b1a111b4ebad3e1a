"""JAX's compilation cache: on from the entry points, bounded, never from an import."""

import json
import os
import subprocess
import sys

from distrl import compile_cache

_PROBE = """
import json, os
import distrl.config  # the package and the learning stack
imported = sorted(k for k in os.environ if k.startswith("JAX_"))
import jax
before = jax.config.jax_compilation_cache_dir
from distrl import compile_cache
compile_cache.enable()
print(json.dumps(dict(imported=imported, before=before, dir=jax.config.jax_compilation_cache_dir,
                      max_size=jax.config.jax_compilation_cache_max_size)))
"""


def test_importing_distrl_changes_nothing_and_enable_bounds_the_cache(tmp_path):
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_", "DISTRL_"))}
    out = subprocess.run(
        [sys.executable, "-c", _PROBE],
        env={**clean, compile_cache.ENV: str(tmp_path)},
        capture_output=True,
        text=True,
        check=True,
    )
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["imported"] == [] and seen["before"] is None
    assert seen["dir"] == str(tmp_path) and seen["max_size"] == compile_cache.MAX_BYTES


def test_off_and_the_users_own_setting_win(monkeypatch, tmp_path):
    monkeypatch.setenv(compile_cache.ENV, "off")
    assert compile_cache.enable() is None
    monkeypatch.setenv(compile_cache.ENV, str(tmp_path / "ours"))
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(tmp_path / "own"))
    assert compile_cache.enable() == str(tmp_path / "own")
