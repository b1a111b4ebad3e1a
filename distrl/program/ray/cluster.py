"""Stage 7, on a cluster: the same `lp.Program` launched on Ray (`--lp_launch_type=ray`).

The entry points of the Ray launcher: `connected` joins the cluster, `launch_count`
says how many actors a launch takes, `run` launches a program and waits for its end.
Launchpad's open-source launchers put every node on one machine; this one keeps
Launchpad's nodes, handles, pickling and process entry point, and changes only where
each node runs and what its handles resolve to. Its parts, in the order a launch
uses them:

1. Place (`placement`, `hosts`): one `nodehost.NodeHost` Ray actor per Launchpad node,
   asking for its group's resources (`placement.placement_options`). Each host reports
   its Ray node, its IP and, for every `lp.Address` its node owns, a port that is free
   on that machine.
2. Bind (`hosts`): each address is bound to `staging.HostPortAddress(ip, port)`, so a
   handle resolves to the serving node's machine wherever it is dereferenced: actors
   on one machine write to the Reverb server on another and pull parameters from the
   learner there.
3. Start (`hosts`): each node's function is pickled the way `local_mp` pickles it, and
   its host runs Launchpad's own `process_entry.py` on it in a child process (which
   dies with the host), output in `<run_dir>/logs/nodes/<group>/<i>`. The servers
   bind the host's cluster address (`distrl.program.bindhost`).
4. Watch (`watch`, `verdict`): one long `NodeHost.watch` call per node; a host that
   fails a call or does not answer is lost only on Ray's verdict, and one that answers
   again goes on where it was.
5. Restart (`recovery`, with the policy both launchers share, `program.restarts`): a
   node exiting non-zero or whose host is lost is recorded in `failures/` with its
   host and started again on the same host, or on a new one; the holders of a moved
   node's address are restarted with the new one.
6. Scale (`scale`, `follow`): `launch/scale.py` requests, and with
   `config.ray.actors="auto"` the actor count follows Ray's node table.
7. Stop (`launch`): on a stop file, a failure beyond the restarts, or Ctrl-C, SIGTERM
   or SIGHUP here, every node gets SIGTERM, SIGKILL after
   `--lp_termination_notice_secs`, and every host actor is killed.

The run directory must be on a file system every machine sees (each node writes its
logs, checkpoints and results there), and every machine needs the same install.
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
