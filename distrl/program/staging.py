"""What every process launcher does to a program before its nodes start.

Shared by the local supervisor (`distrl.program.supervisor`) and the Ray launcher
(`distrl.program.ray.cluster`): each node's name and output file, its Launchpad
launch context (local_mp, with `lifecycle.stop_via_file` as the program stopper, so
that a node's `lp.stop()` reaches the launcher through a file), its input handles
connected, and its function pickled with Launchpad's own serialization; and which
nodes hold a handle to which (`holders`); and the address of a node's server
(`HostPortAddress`: a loopback port `ports` claimed here, a host's port on Ray).
"""

import dataclasses
import os
import tempfile

from launchpad import address as lp_address
from launchpad import context as lp_context
from launchpad.launch import serialization

from distrl.program import lifecycle


class HostPortAddress(lp_address.AbstractAddressBuilder):
    """An `lp.Address` builder for a given host and port: `<host>:<port>`."""

    def __init__(self, host: str, port: int):
        self._address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    def build(self) -> str:
        return self._address


def bind_local(node, claims) -> None:
    """Launchpad's local binding, `localhost:<port>` for each of the node's addresses,
    on ports `claims` (a `ports.Claims`) holds for this launcher alone."""
    for address in node.addresses:
        address.bind(HostPortAddress("localhost", claims.port()))


@dataclasses.dataclass
class Staged:
    """One Launchpad node of a program, named."""

    name: str  # "learner", "actor/3": the name its failures, restarts and logs go by
    label: str  # its program group
    index: int  # its index in the group: output in logs/nodes/<label>/<index>
    node: object  # the lp node


def node_name(label: str, index: int, group_size: int) -> str:
    return f"{label}/{index}" if label == "actor" or group_size > 1 else label


def stage(program) -> list[Staged]:
    """The program's nodes, with launch contexts initialized and input handles connected."""
    nodes = [
        Staged(node_name(label, i, len(group)), label, i, node)
        for label, group in program.groups.items()
        for i, node in enumerate(group)
    ]
    for n in nodes:
        _initialize(n)
    for n in nodes:
        _connect(n)
    return nodes


def stage_added(node, label: str, index: int) -> Staged:
    """A node made after `stage` (an actor added during the run), staged the same way;
    its input handles are the program's, already bound."""
    n = Staged(node_name(label, index, 2), label, index, node)
    _initialize(n)
    _connect(n)
    return n


def _initialize(n: Staged) -> None:
    n.node.launch_context.initialize(
        lp_context.LaunchType.LOCAL_MULTI_PROCESSING,
        None,
        program_stopper=lifecycle.stop_via_file,
    )


def _connect(n: Staged) -> None:
    for handle in n.node.input_handles:
        handle.connect(n.node, n.label)


def holders(nodes: list[Staged], served: Staged) -> list[Staged]:
    """The other nodes that hold a handle to `served` (Launchpad's handle graph: each
    node's input handles against the handles `served` created): their pickles carry
    its bound addresses."""
    return [n for n in nodes if n is not served and holds(n.node, served.node)]


def holds(node, served) -> bool:
    """Whether lp node `node` holds a handle that lp node `served` created."""
    created = [id(h) for h in served._created_handles]  # Launchpad lists them nowhere else
    return any(id(h) in created for h in node.input_handles)


def output_path(output_dir: str, n: Staged) -> str:
    return os.path.join(output_dir, n.label, str(n.index))


def pickled(n: Staged, tmp_dir: str) -> bytes:
    """The node's function, pickled as Launchpad's local_mp pickles it (addresses bound)."""
    os.makedirs(tmp_dir, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=tmp_dir, suffix=".pkl") as f:
        serialization.serialize_functions(f.name, n.name, [n.node.function])
        return f.read()
