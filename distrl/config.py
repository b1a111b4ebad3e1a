"""Stage 8 of the data flow, shared part: the experiment config and its validation.

An experiment is one `ml_collections.ConfigDict` (see `configs/*.py`): the algorithm
preset and its agent fields, the map, the actors, replay, learner, evaluator and
budget. `validate` checks all of it before any process starts and raises
`ConfigError` naming the bad value and what would be valid; `make_agent_config`,
`make_env` turn it into the pure layers' objects.
"""

import dataclasses
import math

import ml_collections

from distrl import agents, envs

LAUNCH_TYPES = ("local_mp", "test_mt", "ray")
SAMPLERS = ("uniform", "prioritized")
LEARNER_DEVICES = ("auto", "gpu", "cpu")


class ConfigError(ValueError):
    """A config value that cannot work; the message names it and what is valid."""


def base_config(algorithm: str) -> ml_collections.ConfigDict:
    """The defaults every experiment shares; `configs/*.py` override them."""
    c = ml_collections.ConfigDict()
    c.algorithm = algorithm  # a preset of distrl.agents.PRESETS
    c.agent = ml_collections.ConfigDict()  # overrides of the preset's dataclass fields
    c.seed = 0
    c.env = ml_collections.ConfigDict(
        dict(map="4x4", slippery=False, time_limit=0, rewards=(1.0, -1.0, 0.0))
    )  # time_limit 0: the map's default (100 on 4x4, 200 otherwise)
    c.num_actors = 2
    c.actor = ml_collections.ConfigDict(
        dict(
            num_envs=64,  # B envs stepped together by one actor
            unroll_length=16,  # T steps per rollout call (and per on-policy item)
            params_update_period=1,  # rollouts between parameter pulls
            epsilon_spread=0.0,  # DQN: actor i uses eps**(1 + spread*i/(N-1)) (Ape-X)
        )
    )
    c.replay = ml_collections.ConfigDict(
        dict(
            max_size=1_000,  # items (DQN: one item = B transitions of one time step)
            min_size=10,  # items before the learner may sample
            samples_per_insert=4.0,  # DQN rate limiter, in items
            error_buffer=0.0,  # 0: derived, max(min_size, samples_per_insert) * 10
            sampler="uniform",  # "uniform" | "prioritized"
            priority_exponent=0.6,
            queue_size=4,  # on-policy: chunks buffered before actors block
        )
    )
    c.learner = ml_collections.ConfigDict(
        dict(
            batch_size=256,  # DQN: transitions; on-policy: chunks of [T, B]
            prefetch=4,  # batches fetched ahead of the update
        )
    )
    c.evaluator = ml_collections.ConfigDict(
        dict(
            num_envs=1000,  # episodes per evaluation (1 on a deterministic map: exact)
            every_seconds=1.0,
            target_success=1.0,  # stop once the success interval's lower bound reaches it
            # > 0: the target is this fraction of the exact optimal success (envs.exact's
            # pi* for the agent's discount) instead of target_success
            target_of_optimal=0.0,
            confirm_envs=10_000,  # episodes of the confirming evaluation near the target
            # a run that ends on a budget reports the confirmed params with the best
            # success lower bound rather than the last ones
            keep_best=True,
            sampled=False,
        )
    )
    c.budget = ml_collections.ConfigDict(dict(env_steps=2_000_000, learner_steps=0, seconds=300.0))
    c.log = ml_collections.ConfigDict(dict(every_seconds=2.0))  # between a node's metric rows
    c.checkpoint = ml_collections.ConfigDict(
        dict(
            every_seconds=60.0,  # learner checkpoints; 0: only when the run ends
            replay=True,  # checkpoint Reverb's tables along with the learner
        )
    )
    # Placement under --lp_launch_type=ray (distrl.program.ray.cluster); ignored by local launches.
    c.ray = ml_collections.ConfigDict(
        dict(
            actor_cpus=1.0,  # CPUs each actor reserves; actors spread over the Ray nodes
            learner_device="auto",  # "auto": a GPU when the cluster has one | "gpu" | "cpu"
            replay_resource="",  # a custom resource the replay's Ray node must have ("": any)
            learner_resource="",  # likewise for the learner's Ray node
        )
    )
    c.run_dir = ""  # everything a run writes goes here; "" -> runs/<algorithm>-<timestamp>
    return c


def make_env(config) -> envs.GridWorld:
    """The GridWorld of `config.env`; map errors surface as ConfigError."""
    e = config.env
    try:
        return envs.make_env(
            map_name=map_spec(e.map),
            slippery=bool(e.slippery),
            time_limit=int(e.time_limit) or None,
            rewards=tuple(e.rewards),
        )
    except ValueError as err:
        raise ConfigError(f"config.env: {err}") from None


def map_spec(value):
    """A map name ('4x4', 'random:8x8:seed=3') or rows written 'SFFF/FHFH/FFFH/HFFG'."""
    if isinstance(value, str) and "/" in value:
        return tuple(value.split("/"))
    return value


def make_agent_config(config):
    """The agent's config dataclass: the preset plus `config.agent` overrides."""
    name = config.algorithm
    if name not in agents.PRESETS:
        raise ConfigError(
            f"config.algorithm={name!r} is unknown; valid: {', '.join(sorted(agents.PRESETS))}"
        )
    cls = agents.PRESETS[name][0]
    fields = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(config.agent.keys()) - fields)
    if unknown:
        raise ConfigError(
            f"config.agent has fields {unknown} that {cls.__name__} lacks; valid: {sorted(fields)}"
        )
    try:
        return agents.make_config(name, **config.agent.to_dict())
    except (TypeError, ValueError) as err:
        raise ConfigError(f"config.agent: {err}") from None


def is_replay(agent_config) -> bool:
    """True for the replay-table pipeline (DQN), False for the on-policy queue."""
    return isinstance(agent_config, agents.DQNConfig)


def items_per_batch(config) -> int:
    """Reverb items in one learner batch (DQN items hold B transitions each)."""
    if is_replay(make_agent_config(config)):
        return config.learner.batch_size // config.actor.num_envs
    return config.learner.batch_size


def validate(config) -> None:
    """Raises ConfigError for any value that cannot work; returns None otherwise."""
    agent_config = make_agent_config(config)
    env = make_env(config)
    del env
    _check(config.num_actors >= 1, f"config.num_actors={config.num_actors}; need >= 1")
    a = config.actor
    _check(a.num_envs >= 1, f"config.actor.num_envs={a.num_envs}; need >= 1")
    _check(a.unroll_length >= 1, f"config.actor.unroll_length={a.unroll_length}; need >= 1")
    _check(
        a.params_update_period >= 1,
        f"config.actor.params_update_period={a.params_update_period}; need >= 1",
    )
    _check(config.learner.batch_size >= 1, f"config.learner.batch_size={config.learner.batch_size}")
    _check(config.learner.prefetch >= 1, f"config.learner.prefetch={config.learner.prefetch}")
    if is_replay(agent_config):
        _validate_replay(config, agent_config)
    else:
        q = config.replay.queue_size
        _check(q >= 1, f"config.replay.queue_size={q}; need >= 1")
    _validate_budget_and_evaluator(config)
    _validate_ray(config)


def _validate_ray(config) -> None:
    r = config.ray
    _check(r.actor_cpus > 0, f"config.ray.actor_cpus={r.actor_cpus}; need > 0")
    _check(
        r.learner_device in LEARNER_DEVICES,
        f"config.ray.learner_device={r.learner_device!r}; valid: {LEARNER_DEVICES}",
    )


def _validate_replay(config, agent_config) -> None:
    r, b, n = config.replay, config.learner.batch_size, config.actor.num_envs
    _check(
        b % n == 0,
        f"config.learner.batch_size={b} must be a multiple of config.actor.num_envs={n} "
        f"(a replay item holds the {n} transitions of one time step)",
    )
    items = b // n
    _check(r.sampler in SAMPLERS, f"config.replay.sampler={r.sampler!r}; valid: {SAMPLERS}")
    _check(r.min_size >= 1, f"config.replay.min_size={r.min_size}; need >= 1")
    _check(
        r.max_size >= max(items, r.min_size),
        f"config.replay.max_size={r.max_size} items is smaller than the batch "
        f"({items} items = {b} transitions) or min_size={r.min_size}; "
        f"need max_size >= {max(items, r.min_size)}",
    )
    _check(
        r.samples_per_insert > 0 and math.isfinite(r.samples_per_insert),
        f"config.replay.samples_per_insert={r.samples_per_insert}; need a finite value > 0",
    )
    # With SampleToInsertRatio, inserts stop once samples lag by error_buffer; the
    # first batch needs min_size items and one batch's worth of sample allowance.
    _check(
        r.error_buffer == 0 or r.error_buffer >= max(r.samples_per_insert, items),
        f"config.replay.error_buffer={r.error_buffer} can never be met: it must be at least "
        f"max(samples_per_insert={r.samples_per_insert}, items per batch={items}), or 0 to derive it",
    )
    _check(
        agent_config.n_step <= config.actor.unroll_length,
        f"config.agent.n_step={agent_config.n_step} exceeds "
        f"config.actor.unroll_length={config.actor.unroll_length}",
    )


def error_buffer(config) -> float:
    """The rate limiter's error buffer, derived when the config leaves it 0."""
    r = config.replay
    if r.error_buffer:
        return float(r.error_buffer)
    return float(max(r.min_size, r.samples_per_insert, items_per_batch(config)) * 10)


def _validate_budget_and_evaluator(config) -> None:
    e, bud = config.evaluator, config.budget
    _check(e.num_envs >= 1, f"config.evaluator.num_envs={e.num_envs}; need >= 1")
    _check(e.every_seconds > 0, f"config.evaluator.every_seconds={e.every_seconds}; need > 0")
    _check(e.confirm_envs >= 1, f"config.evaluator.confirm_envs={e.confirm_envs}; need >= 1")
    _check(
        0.0 <= e.target_of_optimal <= 1.0,
        f"config.evaluator.target_of_optimal={e.target_of_optimal}; need 0..1 (0 disables)",
    )
    _check(
        0.0 <= e.target_success <= 1.0,
        f"config.evaluator.target_success={e.target_success}; need 0..1 (0 disables)",
    )
    for name in ("env_steps", "learner_steps", "seconds"):
        _check(bud[name] >= 0, f"config.budget.{name}={bud[name]}; need >= 0 (0 = no limit)")
    _check(
        bud.env_steps or bud.learner_steps or bud.seconds or e.target_success
        or e.target_of_optimal,
        "config.budget sets no limit and config.evaluator.target_success is 0: "
        "the run would never stop; set one of them",
    )
    log, ckpt = config.log.every_seconds, config.checkpoint.every_seconds
    _check(log > 0, f"config.log.every_seconds={log}; need > 0")
    _check(ckpt >= 0, f"config.checkpoint.every_seconds={ckpt}; need >= 0 (0 = only at the end)")


def _check(ok, message: str) -> None:
    if not ok:
        raise ConfigError(message)
