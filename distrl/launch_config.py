"""The sections only the launchers (`distrl.program`) and the single-process trainer
(`distrl.local`) read: `config.ray`, `config.restart`, `config.local`.

Their fields with their defaults (`FIELDS`, `section_defaults`) and checks
(`check_section`) are here, not beside their readers, which import the config
module that lists this one.
"""

from distrl.errors import at_least, check

LEARNER_DEVICES = ("auto", "gpu", "cpu")
RAY_ACTORS = ("fixed", "auto")
FIELDS = {
    # What the launcher does when a node process dies (distrl.program.supervisor): a run
    # survives the death of any one node by default; launch/train.py --fail_fast sets
    # max_per_node=0 for debugging. A saved run keeps the value it ran with.
    "restart": dict(
        max_per_node=3,  # restarts of each node; 0: a node's death stops the run
        backoff_seconds=1.0,  # wait before a node's first restart, doubled per restart
    ),
    # Placement under --lp_launch_type=ray (distrl.program.ray); ignored by local launches.
    "ray": dict(
        actor_cpus=1.0,  # CPUs each actor reserves; actors spread over the Ray nodes
        learner_device="auto",  # "auto": a GPU when the cluster has one | "gpu" | "cpu"
        replay_resource="",  # a custom resource the replay's Ray node must have ("": any)
        learner_resource="",  # likewise for the learner's Ray node
        # "fixed": num_actors actors (launch/scale.py changes the count); "auto": one
        # actor per actor_cpus slot of the cluster's alive nodes, following machines that
        # join and leave, within min_actors .. max_actors (num_actors unused)
        actors="fixed",
        min_actors=1,  # "auto": the fewest actors the launcher asks for
        max_actors=0,  # "auto": the most (0: no bound)
    ),
    # The single-process trainer only (python -m distrl.local; see distrl/local.py).
    "local": dict(
        # iterations (rollouts of T x num_actors*num_envs) between evaluations; 0 (auto):
        # evaluator.every_env_steps in iterations, as the distributed evaluator's cadence,
        # or every iteration where that is 0 (an evaluation on wall time)
        eval_every=0,
        # iterations per jitted call at most (each block of them has its own key); calls
        # are cut shorter to show progress and to keep budget.seconds
        iterations_per_call=200,
        # XLA backend optimisation level; -1: XLA's default (2). Level 0 compiles a little
        # faster and steps several times slower (docs/decisions.md, "The single-process
        # trainer judges at the evaluator's env-step cadence and compiles at XLA's full
        # optimisation")
        xla_opt_level=-1,
    ),
}
# Integers with their lowest value.
_LOWEST = {
    "local.eval_every": 0,
    "local.iterations_per_call": 1,
    "local.xla_opt_level": -1,
}


def section_defaults(agent_config) -> dict:
    """The restart, ray and local sections with their defaults (any agent's)."""
    return FIELDS


def check_section(experiment) -> None:
    """ConfigError naming the first bad value of config.ray, config.restart, config.local."""
    config = experiment.config
    at_least(config, _LOWEST)
    check(
        config.local.xla_opt_level <= 3,
        f"config.local.xla_opt_level="
        f"{config.local.xla_opt_level}; need -1 (XLA's default) or 0 .. 3",
    )
    r = config.restart
    check(
        isinstance(r.max_per_node, int) and r.max_per_node >= 0,
        f"config.restart.max_per_node={r.max_per_node}; need an int >= 0 (0: no restarts)",
    )
    check(r.backoff_seconds >= 0, f"config.restart.backoff_seconds={r.backoff_seconds}; need >= 0")
    _validate_ray(config)


def _validate_ray(config) -> None:
    r = config.ray
    check(r.actor_cpus > 0, f"config.ray.actor_cpus={r.actor_cpus}; need > 0")
    check(r.actors in RAY_ACTORS, f"config.ray.actors={r.actors!r}; valid: {RAY_ACTORS}")
    check(
        isinstance(r.min_actors, int) and r.min_actors >= 1,
        f"config.ray.min_actors={r.min_actors!r}; need an integer >= 1",
    )
    check(
        isinstance(r.max_actors, int) and (r.max_actors == 0 or r.max_actors >= r.min_actors),
        f"config.ray.max_actors={r.max_actors!r}; need 0 (no bound) or an integer >= "
        f"config.ray.min_actors={r.min_actors}",
    )
    check(
        r.actors != "auto" or config.actor.chunks_per_version == 0,
        f"config.ray.actors='auto' with config.actor.chunks_per_version="
        f"{config.actor.chunks_per_version}: gated actors (rounds of every actor's chunks) "
        f"would stall as the count changes; set chunks_per_version=0 or ray.actors='fixed'",
    )
    check(
        r.learner_device in LEARNER_DEVICES,
        f"config.ray.learner_device={r.learner_device!r}; valid: {LEARNER_DEVICES}",
    )
