"""Stage 8 of the data flow, shared part: the experiment config and its validation.

An experiment is one `ml_collections.ConfigDict` (see `configs/*.py`): the algorithm
preset and its agent fields, the map, the actors, replay, learner, evaluator and
budget. The same config drives the distributed program (`launch/train.py`) and the
single-process trainer (`python -m distrl.local`). `base_config` lists every field
with its default, meaning and unit; the `agent` section holds every field of the
preset's config dataclass (`distrl.agents`), with the preset's values.

Units: replay sizes and the DQN batch count transitions (one env step of one env);
a DQN replay item holds the k x B transitions of k consecutive time steps of one
actor's B envs (k = replay.item_steps, B = actor.num_envs), so they are multiples
of k x B; Reverb's own sizes, the batch's items and the rate limiter's error buffer
count such items (`replay_items`, `items_per_batch`, `error_buffer`). On-policy
items are whole [T, B] chunks (T = unroll_length), counted in chunks.

`validate` checks all of it before any node starts and raises `ConfigError`
naming the bad value and what would be valid; `check_resources` refuses what the
machine cannot hold, from `estimate_memory`; `make_agent_config`, `make_env` turn
the config into the pure layers' objects; `from_dict` rebuilds a saved config.
"""

import dataclasses
import json
import math
import re

import ml_collections

from distrl import agents, envs

LAUNCH_TYPES = ("local_mp", "test_mt", "ray")
SAMPLERS = ("uniform", "prioritized")
LEARNER_DEVICES = ("auto", "gpu", "cpu")
# Default T (env steps per chunk): longer for the whole-episode pipeline (REINFORCE, GRPO).
CHUNK_STEPS = {agents.Pipeline.EPISODES: 64}
MAX_TIME_LIMIT = 1_000_000  # env steps; an evaluation episode may last that long
# Cells of a map: a 1000x1000 random map takes a minute to draw and check, and its
# one-hot observations (8 MB per transition) fit no replay here.
MAX_MAP_CELLS = 250_000
# replay.item_steps's default: 2 time steps per DQN item (items of 2 x 64 transitions
# at the default B) wrote 1.4-1.7x the transitions per second of 1 into Reverb, with
# env steps to solve 4x4 unchanged (10 seeds) and slippery 8x8 within its run-to-run
# spread; 4 (one item per batch) wrote 1.9-2.9x but took about a fifth more env steps
# on 4x4 and needs min_size 1,024 (benchmarks/README.md, "Issue 14: DQN replay items
# of [k, B] transitions"). A run saved before the field has k = 1 (SAVED_BEFORE).
ITEM_STEPS = 2
# Fields added later: their value in older runs.
SAVED_BEFORE = {
    "replay.item_steps": 1,
    "learner.batches_per_read": 1,
    "learner.updates_in_flight": 0,
    "evaluator.every_env_steps": 0,
}


class ConfigError(ValueError):
    """A config value that cannot work; the message names it and what is valid."""


def agent_section(algorithm: str) -> ml_collections.ConfigDict:
    """Every field of the preset's config dataclass, with the preset's values."""
    if algorithm not in agents.PRESETS:
        raise ConfigError(
            f"config.algorithm={algorithm!r} is unknown; valid: {', '.join(sorted(agents.PRESETS))}"
        )
    return ml_collections.ConfigDict(dataclasses.asdict(agents.make_config(algorithm)))


def base_config(algorithm: str) -> ml_collections.ConfigDict:
    """The defaults every experiment shares; `configs/*.py` override them."""
    c = ml_collections.ConfigDict()
    c.algorithm = algorithm  # a preset of distrl.agents.PRESETS (fixed by the config file)
    c.agent = agent_section(algorithm)  # the preset's dataclass fields (see distrl/agents/)
    c.seed = 0  # PRNG seed of every node (0 .. 2**31-1)
    c.env = ml_collections.ConfigDict(
        dict(
            map="4x4",  # '4x4', '8x8', 'random:<rows>x<cols>:seed=<n>' or rows 'SFFF/FHFH/...'
            slippery=False,  # moves slip to either side with probability 1/3 each
            time_limit=0,  # env steps per episode; 0: the map's default (100 on 4x4, else 200)
            rewards=(1.0, -1.0, 0.0),  # reward of reaching G, of falling into H, of any other step
        )
    )
    c.num_actors = 2  # actor processes
    c.actor = ml_collections.ConfigDict(
        dict(
            num_envs=64,  # B: envs one actor steps together
            unroll_length=CHUNK_STEPS.get(agents.make_config(algorithm).pipeline, 16),  # T
            params_update_period=1,  # rollouts between parameter pulls
            epsilon_spread=0.0,  # DQN: actor i uses eps**(1 + spread*i/(N-1)) (Ape-X); >= 0
            chunks_per_version=0,  # on-policy: chunks acted per params version before
            # waiting for the next one (fresh data); 0: act without waiting
            episode_window=0,  # REINFORCE/GRPO: chunks per written window; whole episodes
            # of up to (W - 1) x T steps are trained (distrl/agents/episodes.py); 0: enough
            # for the longest episode, ceil(time limit / T) + 1
        )
    )
    c.replay = ml_collections.ConfigDict(
        dict(
            # DQN: k, consecutive time steps of one actor's B envs per Reverb item (an
            # item holds QTransition [k, B], k x B transitions); the unroll length is a
            # multiple of k, the sizes below and learner.batch_size of k x B
            item_steps=ITEM_STEPS,
            max_size=64_000,  # DQN: transitions kept (FIFO); a multiple of k x actor.num_envs
            min_size=640,  # DQN: transitions before the learner may sample; a multiple of k x B
            samples_per_insert=4.0,  # DQN: transitions sampled per transition inserted (ratio)
            error_buffer=0.0,  # DQN: rate limiter slack, in transitions; 0: derived
            sampler="uniform",  # DQN: "uniform" | "prioritized"
            priority_exponent=0.6,  # DQN, prioritized: alpha, P(i) ~ priority_i ** alpha
            importance_exponent=0.4,  # DQN, prioritized: beta at the first update
            importance_anneal_updates=5_000,  # updates over which beta rises to 1 (0: fixed)
            queue_size=4,  # on-policy: chunks [T, B] buffered before actors block
        )
    )
    c.learner = ml_collections.ConfigDict(
        dict(
            batch_size=256,  # DQN: transitions per update; a multiple of k x actor.num_envs
            batch_chunks=1,  # on-policy: chunks [T, B] per update (T x B transitions each)
            prefetch=4,  # batches fetched ahead of the update (0: none)
            # DQN: batches taken per dataset read, then cut into views: a read costs about
            # 250 us whatever it holds, a third of an update here (benchmarks/README.md)
            batches_per_read=8,
            # DQN: updates dispatched before the oldest is waited for (its params are
            # served once finished); 1 ran the learner alone 1.2-1.5x, but was not shown
            # to learn as well (benchmarks/README.md, session 10); 0: wait for each
            updates_in_flight=0,
            max_in_flight=0,  # samples a dataset worker requests ahead; 0: derived
            # (queue: one batch, so chunks do not age there; replay: max(64 time steps
            # of B envs, i.e. 64 / replay.item_steps items, 4 batches))
        )
    )
    c.evaluator = ml_collections.ConfigDict(
        dict(
            num_envs=1000,  # episodes per evaluation (greedy unless sampled; 1 if deterministic)
            every_seconds=1.0,  # between evaluations (and budget checks), when every_env_steps is 0
            # > 0: evaluate each time the env steps pass a multiple of this instead, so how
            # often a run is judged does not depend on how fast its pipeline is
            every_env_steps=0,
            target_success=1.0,  # stop once the success interval's lower bound is here (0: never)
            # > 0: the target is this fraction of the exact optimal success (envs.exact's
            # pi* for the agent's discount) instead of target_success
            target_of_optimal=0.0,
            confirm_envs=10_000,  # episodes of the confirming evaluation near the target
            # a run that ends on a budget reports the confirmed params with the best
            # success lower bound rather than the last ones
            keep_best=True,
            sampled=False,  # evaluate the sampled policy instead of the greedy one
        )
    )
    c.budget = ml_collections.ConfigDict(
        dict(
            env_steps=2_000_000,  # env steps of all actors together; 0: no limit
            learner_steps=0,  # learner updates; 0: no limit
            seconds=300.0,  # wall-clock seconds of the run; 0: no limit
        )
    )
    c.log = ml_collections.ConfigDict(dict(every_seconds=2.0))  # between a node's metric rows
    c.checkpoint = ml_collections.ConfigDict(
        dict(
            every_seconds=60.0,  # learner checkpoints; 0: only when the run ends
            replay=True,  # checkpoint Reverb's tables along with the learner
            keep=3,  # learner and replay checkpoints kept (resume falls back to older ones)
        )
    )
    # What the launcher does when a node process dies (distrl.program.supervisor).
    c.restart = ml_collections.ConfigDict(
        dict(
            max_per_node=0,  # restarts of each node; 0: a node's death stops the run
            backoff_seconds=1.0,  # wait before a node's first restart, doubled per restart
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
    # The single-process trainer only (python -m distrl.local; see distrl/local.py).
    c.local = ml_collections.ConfigDict(
        dict(
            eval_every=1,  # iterations (rollouts of T x num_actors*num_envs) between evaluations
            iterations_per_call=200,  # iterations per jitted call (a log line after each)
            xla_opt_level=0,  # XLA backend optimisation level; 0 compiles 2x faster, steps
            # ~3x slower; -1: XLA's default (2), for long runs and throughput comparisons
        )
    )
    c.run_dir = ""  # everything a run writes goes here; "" -> runs/<algorithm>-<timestamp>
    return c


def slippery_8x8_to_optimum(algorithm: str) -> ml_collections.ConfigDict:
    """The base of configs/*_slippery8x8.py: slippery 8x8, discount 0.99, a run that
    stops at a confirmed 98% of the exact optimum (`evaluator.target_of_optimal`), an
    evaluation every 100k env steps (so the env steps a run takes to its target do not
    depend on the machine's speed), a learning rate decaying to 1e-5, and a 6M env
    step / 900 s budget."""
    c = base_config(algorithm)
    c.env.update(dict(map="8x8", slippery=True))
    c.agent.update(dict(discount=0.99, learning_rate_final=1e-5))
    c.evaluator.update(dict(target_success=0.0, target_of_optimal=0.98, every_env_steps=100_000))
    c.budget.update(dict(env_steps=6_000_000, seconds=900.0))
    return c


def make_env(config) -> envs.GridWorld:
    """The GridWorld of `config.env`; map errors surface as ConfigError."""
    e = config.env
    _check_map_size(e.map)
    try:
        return envs.make_env(
            map_name=map_spec(e.map),
            slippery=bool(e.slippery),
            time_limit=int(e.time_limit) or None,
            rewards=tuple(e.rewards),
        )
    except ValueError as err:
        raise ConfigError(f"config.env: {err}") from None


def _check_map_size(value) -> None:
    """ConfigError for a map of more than MAX_MAP_CELLS cells, before it is drawn."""
    if isinstance(value, str) and value.startswith("random:"):
        size = re.match(r"random:(\d+)x(\d+)(:|$)", value)
        cells = int(size.group(1)) * int(size.group(2)) if size else 0
    elif isinstance(value, str) and "/" in value:
        rows = value.split("/")
        cells = len(rows) * max(len(r) for r in rows)
    else:
        cells = 0
    _check(
        cells <= MAX_MAP_CELLS,
        f"config.env.map={value[:40]!r}: {cells:,} cells; need at "
        f"most {MAX_MAP_CELLS:,} (e.g. random:500x500:seed=0)",
    )


def map_spec(value):
    """A map name ('4x4', 'random:8x8:seed=3') or rows written 'SFFF/FHFH/FFFH/HFFG'."""
    if isinstance(value, str) and "/" in value:
        return tuple(value.split("/"))
    return value


def make_agent_config(config):
    """The agent's config dataclass, built from `config.agent` (every field)."""
    section = agent_section(config.algorithm)  # ConfigError for an unknown algorithm
    _check_keys(config.agent, section, "config.agent")
    try:
        return agents.make_config(config.algorithm, **config.agent.to_dict())
    except (TypeError, ValueError) as err:
        raise ConfigError(f"config.agent.{err}") from None


def pipeline(config) -> agents.Pipeline:
    """The experiment's pipeline: its agent config's (`agents.Pipeline`)."""
    return make_agent_config(config).pipeline


def episode_window(config) -> int:
    """Chunks in a whole-episode window (REINFORCE, GRPO): the config's, or derived so
    that the longest episode (the time limit) fits: ceil(limit / T) + 1."""
    if config.actor.episode_window:
        return int(config.actor.episode_window)
    return -(-make_env(config).time_limit // config.actor.unroll_length) + 1


def item_length(config) -> int:
    """Time steps in one on-policy item: T, or W x T for whole-episode windows."""
    if pipeline(config) is agents.Pipeline.EPISODES:
        return episode_window(config) * config.actor.unroll_length
    return config.actor.unroll_length


def item_steps(config) -> int:
    """k: time steps per DQN item (`replay.item_steps`; 1 for a config without it)."""
    return int(config.replay.get("item_steps", 1))


def item_transitions(config) -> int:
    """Transitions in one DQN replay item: k x B."""
    return item_steps(config) * config.actor.num_envs


def items_per_batch(config) -> int:
    """Reverb items in one learner batch (a DQN item holds k x B transitions, else a chunk)."""
    if pipeline(config) is agents.Pipeline.REPLAY:
        return config.learner.batch_size // item_transitions(config)
    return config.learner.batch_chunks


def replay_items(config) -> tuple:
    """(max_size, min_size) of the DQN replay table in items of k x B transitions."""
    per_item = item_transitions(config)
    return config.replay.max_size // per_item, config.replay.min_size // per_item


def error_buffer(config) -> float:
    """The rate limiter's error buffer in items (of k x B transitions), derived when
    the config leaves it 0."""
    r = config.replay
    if r.error_buffer:
        return float(r.error_buffer) / item_transitions(config)
    return float(max(replay_items(config)[1], r.samples_per_insert, items_per_batch(config)) * 10)


def from_dict(saved: dict) -> ml_collections.ConfigDict:
    """A saved config (config.json) as a typed config of its algorithm's base.

    A field added after the run was saved (`SAVED_BEFORE`) takes the value that
    run had (`replay.item_steps` 1: the layout of its items and replay checkpoints).
    ConfigError when it is not a dict, names an unknown algorithm, lacks any other
    field (an older distrl wrote it) or has one the base does not know, or a value
    of the wrong type.
    """
    if not isinstance(saved, dict):
        raise ConfigError(f"a saved config must be a JSON object, got {type(saved).__name__}")
    config = base_config(saved.get("algorithm"))
    saved = _nest({**SAVED_BEFORE, **flatten(saved)})
    _check_keys(saved, config, "config")
    for key, value in flatten(saved).items():
        _assign(config, key, value)
    return config


def _nest(flat: dict) -> dict:
    """{'a.b': 1} -> {'a': {'b': 1}}."""
    tree = {}
    for key, value in flat.items():
        *parents, leaf = key.split(".")
        node = tree
        for name in parents:
            node = node.setdefault(name, {})
        node[leaf] = value
    return tree


def load_json(path: str) -> ml_collections.ConfigDict:
    """A config.json as `from_dict` reads it; ConfigError naming the file's problem."""
    try:
        with open(path) as f:
            saved = json.load(f)
    except OSError as err:
        raise ConfigError(f"cannot read {path}: {err.strerror}") from None
    except ValueError as err:
        raise ConfigError(f"{path} is not valid JSON: {err}") from None
    try:
        return from_dict(saved)
    except ConfigError as err:
        raise ConfigError(f"{path}: {err}") from None


def _assign(config, key: str, value) -> None:
    """config.<key> = value through the base's type (ConfigError on a mismatch)."""
    *parents, leaf = key.split(".")
    node = config
    for name in parents:
        node = node[name]
    try:
        node[leaf] = tuple(value) if isinstance(value, list) else value
    except TypeError:
        kind = type(node[leaf]).__name__
        raise ConfigError(f"config.{key}={value!r} is not of type {kind}") from None


def _check_keys(given, base, where: str) -> None:
    """ConfigError naming fields `given` has that `base` lacks, or lacks, at any depth."""
    have, want = flatten(_plain(given)), flatten(_plain(base))
    unknown = sorted(set(have) - set(want))
    missing = sorted(set(want) - set(have))
    if unknown:
        key = unknown[0]
        parent = key.rpartition(".")[0]
        siblings = sorted(k.rpartition(".")[2] for k in want if k.rpartition(".")[0] == parent)
        raise ConfigError(
            f"{where}.{key} is unknown ({len(unknown)} unknown: {', '.join(unknown)}); "
            f"valid fields{' of ' + where + '.' + parent if parent else ''}: {', '.join(siblings)}"
        )
    if missing:
        more = f", ... ({len(missing)} in all)" if len(missing) > 6 else ""
        shown = ", ".join(missing[:6]) + more
        raise ConfigError(
            f"{where} lacks {shown} (written by an older distrl, or removed "
            f"by the config file); every field of distrl.config.base_config is needed"
        )


def _plain(tree):
    return tree.to_dict() if isinstance(tree, ml_collections.ConfigDict) else tree


def flatten(tree: dict, prefix: str = "") -> dict:
    """{'a': {'b': 1}} -> {'a.b': 1}."""
    flat = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            flat.update(flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def validate(config) -> None:
    """Raises ConfigError for any value that cannot work; returns None otherwise."""
    base = base_config(config.algorithm)  # ConfigError for an unknown algorithm
    _check_keys(config, base, "config")
    _check_types(config, base)
    agent_config = make_agent_config(config)
    make_env(config)
    _check_ranges(config)
    if agent_config.pipeline is agents.Pipeline.REPLAY:
        _validate_replay(config, agent_config)
    else:
        _validate_on_policy(config, agent_config)
    _validate_budget_and_evaluator(config)
    _validate_ray(config)
    _validate_restart(config)


def _validate_restart(config) -> None:
    r, keep = config.restart, config.checkpoint.keep
    _check(isinstance(keep, int) and keep >= 1, f"config.checkpoint.keep={keep}; need an int >= 1")
    _check(
        isinstance(r.max_per_node, int) and r.max_per_node >= 0,
        f"config.restart.max_per_node={r.max_per_node}; need an int >= 0 (0: no restarts)",
    )
    _check(r.backoff_seconds >= 0, f"config.restart.backoff_seconds={r.backoff_seconds}; need >= 0")


def _check_types(config, base) -> None:
    """Each value has its base field's type (an int where a float is wanted is fine)."""
    have = flatten(_plain(config))
    for key, default in flatten(_plain(base)).items():
        value, kind = have[key], type(default)
        if kind is float:
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        elif kind is int:
            ok = isinstance(value, int) and not isinstance(value, bool)
        elif kind in (tuple, list):
            ok = isinstance(value, (tuple, list))
        else:
            ok = isinstance(value, kind)
        _check(ok, f"config.{key}={value!r} is a {type(value).__name__}; need a {kind.__name__}")
        if kind is float:
            _check(math.isfinite(value), f"config.{key}={value!r}; need a finite number")


def _at_least(config, key: str, low) -> None:
    value = config
    for name in key.split("."):
        value = value[name]
    _check(value >= low, f"config.{key}={value}; need >= {low}")


# Integers and non-negative numbers outside the agent section, with their lowest value.
_LOWEST = {
    "num_actors": 1,
    "actor.num_envs": 1,
    "actor.unroll_length": 1,
    "replay.item_steps": 1,
    "actor.params_update_period": 1,
    "actor.epsilon_spread": 0,
    "learner.prefetch": 0,
    "learner.batches_per_read": 1,
    "learner.updates_in_flight": 0,
    "learner.max_in_flight": 0,
    "actor.chunks_per_version": 0,
    "evaluator.num_envs": 1,
    "seed": 0,
    "env.time_limit": 0,
    "local.eval_every": 1,
    "local.iterations_per_call": 1,
    "local.xla_opt_level": -1,
}


def _check_ranges(config) -> None:
    for key, low in _LOWEST.items():
        _at_least(config, key, low)
    _check(config.seed < 2**31, f"config.seed={config.seed}; need 0 .. 2**31-1")
    t = config.env.time_limit
    _check(t <= MAX_TIME_LIMIT, f"config.env.time_limit={t}; need 0 .. {MAX_TIME_LIMIT} steps")
    _check(
        config.local.xla_opt_level <= 3,
        f"config.local.xla_opt_level="
        f"{config.local.xla_opt_level}; need -1 (XLA's default) or 0 .. 3",
    )
    rewards = config.env.rewards
    _check(
        len(rewards) == 3
        and all(isinstance(r, (int, float)) and math.isfinite(r) for r in rewards),
        f"config.env.rewards={tuple(rewards)}; need 3 finite numbers (goal, hole, step)",
    )


def _validate_gate(config) -> None:
    """Gated actors must produce a whole batch per version, or the learner waits forever."""
    per_version, k = config.actor.chunks_per_version, items_per_batch(config)
    _check(
        per_version == 0 or config.num_actors * per_version >= k,
        f"config.actor.chunks_per_version={per_version} x config.num_actors="
        f"{config.num_actors} chunks per version is less than one batch "
        f"(config.learner.batch_chunks={k}); need at least {k}, or 0",
    )


def _validate_ray(config) -> None:
    r = config.ray
    _check(r.actor_cpus > 0, f"config.ray.actor_cpus={r.actor_cpus}; need > 0")
    _check(
        r.learner_device in LEARNER_DEVICES,
        f"config.ray.learner_device={r.learner_device!r}; valid: {LEARNER_DEVICES}",
    )


def _validate_on_policy(config, agent_config) -> None:
    _check(
        not config.learner.updates_in_flight,
        f"config.learner.updates_in_flight={config.learner.updates_in_flight}: only a "
        f"replay (DQN) learner may run ahead; an on-policy one finishes each update (a "
        f"gated actor waits for its version); need 0",
    )
    q, k = config.replay.queue_size, config.learner.batch_chunks
    _check(q >= 1, f"config.replay.queue_size={q} chunks; need >= 1")
    _check(k >= 1, f"config.learner.batch_chunks={k}; need >= 1")
    _validate_gate(config)
    w = config.actor.episode_window
    _check(w == 0 or w >= 2, f"config.actor.episode_window={w}; need >= 2 chunks, or 0")
    if isinstance(agent_config, agents.PPOConfig):
        steps = k * config.actor.unroll_length * config.actor.num_envs
        m = agent_config.num_minibatches
        _check(
            m <= steps,
            f"config.agent.num_minibatches={m} exceeds the {steps} time steps "
            f"of a batch (batch_chunks x unroll_length x num_envs)",
        )


def _validate_replay(config, agent_config) -> None:
    r, b, n = config.replay, config.learner.batch_size, config.actor.num_envs
    k, t = r.item_steps, config.actor.unroll_length
    _check(
        t % k == 0,
        f"config.replay.item_steps={k} does not divide config.actor.unroll_length={t}; "
        f"need a divisor of it (a rollout of {t} steps writes whole items of {k} steps)",
    )
    per_item = k * n
    what = (
        f"a multiple of config.replay.item_steps x config.actor.num_envs = {k} x {n} = "
        f"{per_item} (a replay item holds {per_item} transitions: {k} time "
        f"step{'s' * (k > 1)} of {n} envs)"
    )
    for key, value in (
        ("learner.batch_size", b),
        ("replay.max_size", r.max_size),
        ("replay.min_size", r.min_size),
    ):
        _check(
            value >= per_item and value % per_item == 0,
            f"config.{key}={value} transitions; need {what}",
        )
    _check(r.sampler in SAMPLERS, f"config.replay.sampler={r.sampler!r}; valid: {SAMPLERS}")
    _check(
        r.priority_exponent >= 0,
        f"config.replay.priority_exponent={r.priority_exponent}; need >= 0",
    )
    need = max(b, r.min_size)
    beta, anneal = r.importance_exponent, r.importance_anneal_updates
    _check(0.0 <= beta <= 1.0, f"config.replay.importance_exponent={beta}; need 0..1")
    _check(anneal >= 0, f"config.replay.importance_anneal_updates={anneal}; need >= 0")
    _check(
        r.max_size >= need,
        f"config.replay.max_size={r.max_size} transitions is smaller than the batch "
        f"(batch_size={b}) or min_size={r.min_size}; need max_size >= {need}",
    )
    _check(
        r.samples_per_insert > 0,
        f"config.replay.samples_per_insert={r.samples_per_insert}; need a finite value > 0",
    )
    # With SampleToInsertRatio, inserts stop once samples lag by error_buffer; the
    # first batch needs min_size items and one batch's worth of sample allowance.
    low = max(r.samples_per_insert * per_item, b)
    _check(
        r.error_buffer == 0 or r.error_buffer >= low,
        f"config.replay.error_buffer={r.error_buffer} transitions can never be met: it must be "
        f"at least max(samples_per_insert x item_steps x num_envs, batch_size) = {low:g}, "
        f"or 0 to derive it",
    )
    _check(
        agent_config.n_step <= config.actor.unroll_length,
        f"config.agent.n_step={agent_config.n_step} exceeds "
        f"config.actor.unroll_length={config.actor.unroll_length}",
    )


def _validate_budget_and_evaluator(config) -> None:
    e, bud = config.evaluator, config.budget
    _check(e.every_seconds > 0, f"config.evaluator.every_seconds={e.every_seconds}; need > 0")
    _check(
        isinstance(e.every_env_steps, int) and e.every_env_steps >= 0,
        f"config.evaluator.every_env_steps={e.every_env_steps!r}; need an integer >= 0 "
        f"(0 = every every_seconds of wall time)",
    )
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
        bud.env_steps
        or bud.learner_steps
        or bud.seconds
        or e.target_success
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
