"""Ports for node servers that nothing else on this machine is given.

Launchpad binds each local node address to a port portpicker finds free at that moment,
which is a port the kernel hands out for outgoing connections too (its ephemeral range).
Any client socket, of this run or another, can take that port before the node's server
binds it; the server then fails to start ("Failed to start Courier gRPC server"), and
again on every restart, as its address is fixed (as in CI, tests running in parallel).
So a node's port is drawn below the ephemeral range (above Ray's worker ports,
10002-19999), where no connection is given one, and is a launcher's only while it holds
an exclusive `flock` on the port's file in one per-user directory of /tmp: two launchers
starting together are never given the same port, and the kernel drops the lock when the
launcher (and any process forked from it) is gone, however it ends, so nothing is left
to clean up.
"""

import fcntl
import os
import random
import socket
import tempfile

import portpicker

_LOWEST = 20000  # above Ray's worker ports (its default max_worker_port is 19999)
_TRIES = 100
_RANDOM = random.SystemRandom()  # unseeded: launchers started together draw apart


def claims_dir() -> str:
    """Machine-wide, not $TMPDIR: every launcher of this user must see the same claims."""
    root = "/tmp" if os.access("/tmp", os.W_OK) else tempfile.gettempdir()
    return os.path.join(root, f"distrl-ports-{os.getuid()}")


def ephemeral_range() -> tuple[int, int]:
    """The kernel's range for ports of outgoing connections (Linux's default if unknown)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low, high = (int(v) for v in f.read().split())
        return low, high
    except (OSError, ValueError):
        return 32768, 60999


def _free(port: int) -> bool:
    """Whether a server could bind `port` now (as gRPC binds: SO_REUSEADDR)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("", port))
        except OSError:
            return False
    return True


def pick_server_port() -> int:
    """A free port outside the ephemeral range (portpicker's when that leaves too few)."""
    low, high = ephemeral_range()
    span = range(_LOWEST, low) if low - _LOWEST >= 1000 else range(max(high + 1, _LOWEST), 65536)
    if len(span) < 1000:
        return portpicker.pick_unused_port()
    for _ in range(_TRIES):
        port = _RANDOM.choice(span)
        if _free(port):
            return port
    return portpicker.pick_unused_port()


class Claims:
    """The ports one launcher holds; held until `release` or the process ends."""

    def __init__(self, pick=pick_server_port, directory: str | None = None):
        self._pick = pick
        self._dir = directory or claims_dir()
        os.makedirs(self._dir, mode=0o700, exist_ok=True)
        self._held: dict[int, int] = {}  # port -> fd of its locked file

    def port(self) -> int:
        """A free port that no other holder of a claim in this directory has."""
        for _ in range(_TRIES):
            port = self._pick()
            if port not in self._held and self._claim(port):
                return port
        raise RuntimeError(f"no free port left unclaimed in {self._dir} after {_TRIES} picks")

    def _claim(self, port: int) -> bool:
        fd = os.open(os.path.join(self._dir, str(port)), os.O_CREAT | os.O_RDWR, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # another launcher's node has it
            os.close(fd)
            return False
        self._held[port] = fd
        return True

    def release(self) -> None:
        # The files stay: removing one could let two launchers lock different inodes
        # of the same name.
        for fd in self._held.values():
            os.close(fd)
        self._held.clear()
