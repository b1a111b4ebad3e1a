"""Where a node may run on the Ray cluster: its group's Ray actor options, whether the
alive Ray nodes can hold the program, and how many actors they hold. Pure but for
`alive_nodes` (Ray's node table).
"""

import ray

from distrl.config import ConfigError
from distrl.program import scaling


def alive_nodes() -> list[dict]:
    """The resources of each Ray node Ray counts alive."""
    return [n["Resources"] for n in ray.nodes() if n["Alive"]]


def placement_options(label: str, config, cluster_has_gpu: bool) -> dict:
    """Ray actor options for a node of group `label`.

    Actors reserve `config.ray.actor_cpus` each and are spread over the Ray nodes;
    the learner takes a GPU when `learner_device` says so ("auto": when the cluster
    has one); replay and learner need their custom resource when the config names
    one. The rest (evaluator, counter) may run anywhere.
    """
    r = config.ray
    if label == "actor":
        return dict(num_cpus=r.actor_cpus, scheduling_strategy="SPREAD")
    options = dict(num_cpus=0)
    resource = {"replay": r.replay_resource, "learner": r.learner_resource}.get(label, "")
    if resource:
        options["resources"] = {resource: 0.001}
    if label == "learner":
        gpu = r.learner_device == "gpu" or (r.learner_device == "auto" and cluster_has_gpu)
        options["num_gpus"] = 1 if gpu else 0
    return options


def check_fits(config, nodes_resources: list[dict]) -> None:
    """ConfigError when no placement of the program on these Ray nodes can exist."""
    r = config.ray
    total_cpus = sum(n.get("CPU", 0) for n in nodes_resources)
    largest = max((n.get("CPU", 0) for n in nodes_resources), default=0)
    if r.actor_cpus > largest:
        raise ConfigError(
            f"config.ray.actor_cpus={r.actor_cpus}, but the largest Ray node has {largest:g} CPUs"
        )
    need = config.num_actors * r.actor_cpus
    fit = actor_slots(config, nodes_resources)
    if config.num_actors > fit:
        raise ConfigError(
            f"config.num_actors={config.num_actors} x config.ray.actor_cpus={r.actor_cpus} "
            f"= {need:g} CPUs, but the Ray cluster fits {fit} such actors "
            f"({total_cpus:g} CPUs on {len(nodes_resources)} nodes)"
        )
    for field in ("replay_resource", "learner_resource"):
        name = r[field]
        if name and not any(n.get(name, 0) > 0 for n in nodes_resources):
            have = sorted({k for n in nodes_resources for k in n if not k.startswith("node:")})
            raise ConfigError(
                f"config.ray.{field}={name!r}: no Ray node has that resource; "
                f"the cluster's resources: {have}"
            )
    if r.learner_device == "gpu" and not any(n.get("GPU", 0) >= 1 for n in nodes_resources):
        raise ConfigError("config.ray.learner_device='gpu', but no Ray node has a GPU")


def actor_slots(config, nodes_resources: list[dict]) -> int:
    """How many actors of `config.ray.actor_cpus` CPUs these Ray nodes hold, node by node."""
    return sum(int(n.get("CPU", 0) // config.ray.actor_cpus) for n in nodes_resources)


def follow_count(config, nodes_resources: list[dict]) -> int:
    """The actor count of a run that follows the cluster (`config.ray.actors="auto"`):
    one per actor slot of these nodes (`actor_slots`), at most `ray.max_actors` (0: no
    bound), the largest such count the config accepts (`scaling.check_count`).
    ConfigError when that is below `ray.min_actors`."""
    r = config.ray
    slots = actor_slots(config, nodes_resources)
    top = min(slots, r.max_actors) if r.max_actors else slots
    for count in range(top, r.min_actors - 1, -1):
        try:
            scaling.check_count(config, count, local=False)
            return count
        except ConfigError:
            continue
    cpus = sum(n.get("CPU", 0) for n in nodes_resources)
    fits = (
        f"config.ray.actors='auto': the Ray cluster fits {slots} actors of config.ray."
        f"actor_cpus={r.actor_cpus:g} ({cpus:g} CPUs on {len(nodes_resources)} nodes)"
    )
    if top < r.min_actors:
        raise ConfigError(f"{fits}, fewer than config.ray.min_actors={r.min_actors}")
    raise ConfigError(f"{fits}; the config accepts no count from {r.min_actors} to {top}")


def check_fits_count(config, actors: int, nodes_resources: list[dict]) -> None:
    """`check_fits` for the program with `actors` actors instead of `config.num_actors`."""
    sized = config.copy_and_resolve_references()
    sized.num_actors = actors
    check_fits(sized, nodes_resources)
