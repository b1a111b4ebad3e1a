"""Which interface a node's servers listen on: loopback locally, the cluster address on Ray.

Reverb's and courier's servers (compiled into dm-reverb 0.7.2 and dm-launchpad
0.5.2) always bind "[::]:port", every interface, and take no address. They are
unauthenticated and courier carries pickled calls, so distrl loads a small
LD_PRELOAD library (`native/bindhost.c`) into each node process that turns a
wildcard bind into a bind of `DISTRL_BIND_HOST`: 127.0.0.1 under `local_mp`, the
machine's cluster IP under Ray. The library is compiled on first use with the
machine's C compiler into ~/.cache/distrl/ (or $DISTRL_CACHE); without a compiler
the servers keep listening on every interface and a warning says so.
"""

import functools
import hashlib
import os
import shutil
import subprocess
import tempfile

from absl import logging

HOST_ENV = "DISTRL_BIND_HOST"
LOOPBACK = "127.0.0.1"
_SOURCE = os.path.join(os.path.dirname(__file__), "native", "bindhost.c")


def _cache_dir() -> str:
    default = os.path.join(os.path.expanduser("~"), ".cache", "distrl")
    return os.environ.get("DISTRL_CACHE", default)


@functools.cache
def library() -> str | None:
    """Path of the compiled shim (built once per source version), or None if it cannot be built."""
    with open(_SOURCE, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:16]
    path = os.path.join(_cache_dir(), f"bindhost-{digest}.so")
    if os.path.exists(path):
        return path
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        logging.warning(
            "distrl: no C compiler (cc) to build %s; node servers will listen on every interface",
            _SOURCE,
        )
        return None
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".so")
    os.close(fd)
    command = [compiler, "-shared", "-fPIC", "-O2", "-o", tmp, _SOURCE, "-ldl"]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        os.remove(tmp)
        logging.warning(
            "distrl: building the bind shim failed (%s); node servers will listen "
            "on every interface:\n%s",
            " ".join(command),
            done.stderr,
        )
        return None
    os.replace(tmp, path)  # atomic: concurrent builders each install a whole file
    return path


def environment(host: str) -> dict:
    """Variables that make a node process's servers listen on `host` only ({} without the shim)."""
    path = library()
    if path is None:
        return {}
    preload = " ".join(p for p in (path, os.environ.get("LD_PRELOAD", "")) if p)
    return {"LD_PRELOAD": preload, HOST_ENV: host}
