"""The nodes of one Ray launch as its parts see them (`hosts`, `watch`, `recovery`,
`scale`, `launch`): each Launchpad node with its host and where it runs, and what
every part shares."""

import dataclasses
from collections.abc import Callable


@dataclasses.dataclass
class Node:
    """One Launchpad node as the Ray launcher sees it."""

    name: str  # "learner", "actor/3": the name its failures and output go by
    label: str  # its program group
    node: object  # the lp node
    options: dict  # the Ray actor options that place it
    output: str  # its output file
    host: object = None  # its NodeHost actor (None once its Ray node was lost)
    where: dict | None = None  # what the host reported by `locate`
    unreachable_since: float | None = None  # monotonic time its host stopped answering
    holders: list = dataclasses.field(default_factory=list)  # the Nodes holding its handles

    def machine(self) -> str:
        w = self.where or {}
        ray_node = w.get("ray_node", "?")[:12]
        return f"host {w.get('hostname')} ({w.get('ip')}, Ray node {ray_node})"

    def describe(self) -> str:
        return f"{self.name} on {self.machine()}"


@dataclasses.dataclass
class Run:
    """What every part of one Ray launch shares."""

    config: object
    run_dir: str
    envs: dict  # group -> its node processes' environment variables
    nodes: list[Node]  # the run's nodes now (actors come and go)
    say: Callable[[str], None]  # a line in the terminal and the launcher's log
    began: float  # time.time() at the launch
