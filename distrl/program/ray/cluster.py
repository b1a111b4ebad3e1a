"""Stage 7, on a cluster: the same `lp.Program` launched on Ray (`--lp_launch_type=ray`).

Entry points: `connected` joins the cluster, `launch_count` says how many actors a
launch takes, `run` launches a program and waits for its end. Launchpad's nodes,
handles, pickling and entry point stay; only where each node runs and what its
handles resolve to change. The parts, in the order a launch uses them:

1. Place (`placement`, `hosts`): one `nodehost.NodeHost` Ray actor per node, with its
   group's resources; each reports its Ray node, its IP and a free port there for
   every `lp.Address` its node owns.
2. Bind (`hosts`): each address to that machine's port, so a handle resolves to the
   serving node's machine wherever it is dereferenced; the servers bind the host's
   cluster address (`distrl.program.bindhost`).
3. Start (`hosts`): each node pickled as `local_mp` pickles it and run by its host in
   a child process, output in `<run_dir>/logs/nodes/<group>/<i>`.
4. Watch (`watch`, `verdict`): a host that fails a call is lost only on Ray's verdict.
5. Restart (`recovery`, `program.restarts`): on the same host or on a new one; the
   holders of a moved node's address restart with the new one.
6. Scale (`scale`, `follow`): `launch/scale.py` requests, or Ray's node table with
   `config.ray.actors="auto"`.
7. Stop (`launch`): SIGTERM to every node, SIGKILL after the notice, hosts killed.

The run directory must be on a file system every machine sees, and every machine
needs the same install.
"""

import contextlib
import logging as std_logging
import socket

import ray

from distrl.config import ConfigError
from distrl.program import staging
from distrl.program.errors import LaunchError
from distrl.program.ray import placement
from distrl.program.ray.launch import Launch
from distrl.program.ray.nodes import Node
from distrl.program.ray.scale import Actors
from distrl.records import rundir

NAMESPACE = "distrl"
_START_RAY = (
    "Start one first: `ray start --head` on the head machine, then "
    "`ray start --address=<head ip>:6379` on each other machine."
)


def launch_count(config) -> int | None:
    """The actor count a run that follows the cluster starts with (None: config.num_actors)."""
    if config.ray.actors != "auto":
        return None
    return placement.follow_count(config, placement.alive_nodes())


def check_address(address: str) -> None:
    """Fails fast for an address Ray would retry for minutes: ConfigError if malformed,
    LaunchError if nothing listens there. "auto" is left to Ray (it fails at once)."""
    if address == "auto":
        return
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(
            f"--ray_address={address!r}; valid: HOST:PORT of the head "
            "(as `ray start --head` printed it) or auto"
        )
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=5).close()
    except OSError as err:
        raise LaunchError(
            f"no Ray cluster answers at --ray_address={address} ({err}). " + _START_RAY
        ) from err


@contextlib.contextmanager
def connected(address: str, config, actors: int | None = None):
    """Joins the Ray cluster at `address` as a driver for the block, after checking that
    it can hold `config`'s program with `actors` actors (default: `num_actors`, or the
    cluster's count with `ray.actors="auto"`) (ConfigError if not; LaunchError if there
    is no cluster)."""
    check_address(address)
    try:
        ray.init(
            address=address,
            namespace=NAMESPACE,
            log_to_driver=False,
            logging_level=std_logging.WARNING,
        )
    except (ConnectionError, RuntimeError, ValueError) as err:
        raise LaunchError(
            f"cannot join a Ray cluster at --ray_address={address}: {err} " + _START_RAY
        ) from err
    try:
        nodes = placement.alive_nodes()
        if config.ray.actors == "auto":  # the count the launch will take (`launch_count`)
            actors = placement.follow_count(config, nodes)
        elif actors is None:
            actors = config.num_actors
        placement.check_fits_count(config, actors, nodes)
        yield
    finally:
        ray.shutdown()


def run(program, config, run_dir: str, envs: dict, stream) -> list[dict]:
    """Launches `program` on the cluster joined by `connected`, waits until it has stopped
    and returns the restarts made (`config.restart`, as under local_mp).

    `envs` maps each group to its node processes' environment variables.
    """
    has_gpu = any(n.get("GPU", 0) >= 1 for n in placement.alive_nodes())
    output_dir = rundir.node_output_dir(run_dir)
    staged = staging.stage(program)
    nodes = {
        s.name: Node(
            name=s.name,
            label=s.label,
            node=s.node,
            options=placement.placement_options(s.label, config, has_gpu),
            output=staging.output_path(output_dir, s),
        )
        for s in staged
    }
    for s in staged:
        nodes[s.name].holders = [nodes[h.name] for h in staging.holders(staged, s)]
    actors = Actors(
        getattr(program, "more_actors", None),
        placement.placement_options("actor", config, has_gpu),
        output_dir,
    )
    return Launch(list(nodes.values()), config, run_dir, envs, actors).run(stream)
