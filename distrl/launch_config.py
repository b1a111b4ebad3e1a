"""The sections only the launchers (`distrl.program`) and the single-process trainer
(`distrl.local`) read: `config.ray`, `config.restart`, `config.local`.

Not beside them: those modules import the config module, whose `validate` calls this
one (a leaf, as `evaluator_config` is for the evaluator's section).
"""

from distrl.errors import at_least, check

LEARNER_DEVICES = ("auto", "gpu", "cpu")
RAY_ACTORS = ("fixed", "auto")
# Integers with their lowest value.
_LOWEST = {
    "local.eval_every": 0,
    "local.iterations_per_call": 1,
    "local.xla_opt_level": -1,
}


def validate(config) -> None:
    """ConfigError naming the first bad value of config.ray, config.restart, config.local."""
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
