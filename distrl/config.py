"""Stage 8 of the data flow, shared part: the experiment config and its validation.

An experiment is one `ml_collections.ConfigDict` (see `configs/*.py`): the algorithm
preset and its agent fields, the map, the actors, replay, learner, evaluator and
budget. The same config drives the distributed program (`launch/train.py`) and the
single-process trainer (`python -m distrl.local`). `base_config` lists every field
with its default, meaning and unit; the `agent` section holds every field of the
preset's config dataclass (`distrl.agents`), with the preset's values.

The fields that only one pipeline reads (replay table or queue sizes, the learner's
batch, the on-policy gate) come with their defaults, meaning and units from the
pipeline's module (`distrl.pipelines`); every config has all of them.

`validate` checks all of it before any node starts and raises `ConfigError`
naming the bad value and what would be valid (the pipeline checks its own fields);
`distrl.resources` refuses what the machine cannot hold; `make_agent_config`,
`make_env` turn the config into the pure layers' objects; `from_dict` rebuilds a
saved config, `upgrade` brings an older one up to date.
"""

import dataclasses
import json
import math
import re

import ml_collections

from distrl import agents, envs, networks, pipelines
from distrl.envs import exact, factory, host_env
from distrl.errors import ConfigError
from distrl.errors import check as _check

LAUNCH_TYPES = ("local_mp", "test_mt", "ray")
LEARNER_DEVICES = ("auto", "gpu", "cpu")
MAX_TIME_LIMIT = 1_000_000  # env steps; an evaluation episode may last that long
# Cells of a map: a 1000x1000 random map takes a minute to draw and check, and its
# one-hot observations (8 MB per transition) fit no replay here.
MAX_MAP_CELLS = 250_000
# Episodes of one evaluation: 10**6 puts the Wilson interval within +-0.001; more only
# fills the evaluator's memory (its envs are stepped together, in one jit).
MAX_EVAL_EPISODES = 1_000_000
GRIDWORLD = "gridworld"  # config.env.name of the built-in env
AUTO = -1.0  # evaluator.target_success: 1.0 where the env has a success signal, else none


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
            # "gridworld" (the built-in, with the fields below) or a factory of your own,
            # 'module.path:function' (README, "Your own environment")
            name=GRIDWORLD,
            kwargs="{}",  # the factory's keyword arguments as a JSON object (not the gridworld's)
            # envs stepped in Python ('gymnasium:<id>' or a factory returning a gymnasium.Env):
            vector="sync",  # an actor's B copies: "sync" in its process, "async": a process each
            step_timeout_s=60.0,  # a vector step slower than this fails the actor (0: no limit)
            # the gridworld's own fields:
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
            # T: env steps per rollout chunk (the pipeline's default: 64 for whole episodes)
            unroll_length=pipelines.of(agents.make_config(algorithm)).unroll_length,
            params_update_period=1,  # rollouts between parameter pulls
            epsilon_spread=0.0,  # DQN: actor i uses eps**(1 + spread*i/(N-1)) (Ape-X); >= 0
        )
    )
    c.replay = ml_collections.ConfigDict()  # the pipelines' fields: replay table or queue
    c.learner = ml_collections.ConfigDict(
        dict(
            prefetch=4,  # batches fetched ahead of the update (0: none)
            max_in_flight=0,  # samples a dataset worker requests ahead; 0: the pipeline's
            # (queue: one batch, so chunks do not age there; replay: max(64 time steps
            # of B envs, i.e. 64 / replay.item_steps items, 4 batches))
        )
    )
    # Each pipeline's own fields, with their defaults and meaning (distrl/pipelines/):
    # replay.* and learner.batch_size, batches_per_read, updates_in_flight (DQN),
    # replay.queue_size, learner.batch_chunks, actor.chunks_per_version (on-policy),
    # actor.episode_window (REINFORCE, GRPO).
    for section, values in pipelines.fields().items():
        c[section].update(values)
    c.evaluator = ml_collections.ConfigDict(
        dict(
            num_envs=1000,  # episodes per evaluation (greedy unless sampled; 1 if deterministic)
            every_seconds=1.0,  # between evaluations (and budget checks), when every_env_steps is 0
            # > 0: evaluate each time the env steps pass a multiple of this instead, so how
            # often a run is judged does not depend on how fast its pipeline is
            every_env_steps=0,
            # stop once the success interval's lower bound is here (0: never); -1 (AUTO):
            # 1.0 on an env with a success signal (the gridworld), none on one without;
            # a value 0..1 set on an env without a success signal is refused
            target_success=AUTO,
            # > 0: the target is this fraction of the exact optimum (envs.exact's pi* for
            # the agent's discount, expected over the env's start states) instead of
            # target_success, in the figure optimal_measure names
            target_of_optimal=0.0,
            # "success": of pi*'s success probability (a success target); "return": of
            # pi*'s undiscounted expected return, J* - (1 - fraction) |J*| (a return
            # target in place of target_return; exact.return_target: returns can be < 0)
            optimal_measure="success",
            # stop once the greedy mean return's 95% interval lower bound is here (0: never);
            # with a success target set too, both must be reached
            target_return=0.0,
            confirm_envs=10_000,  # episodes of the confirming evaluation near the target
            # a run that ends on a budget or is stopped reports (and keeps) the
            # confirmed params with the best success lower bound rather than the last
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
    # What the launcher does when a node process dies (distrl.program.supervisor): a run
    # survives the death of any one node by default; launch/train.py --fail_fast sets
    # max_per_node=0 for debugging. A saved run keeps the value it ran with.
    c.restart = ml_collections.ConfigDict(
        dict(
            max_per_node=3,  # restarts of each node; 0: a node's death stops the run
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
            # "fixed": num_actors actors (launch/scale.py changes the count); "auto": one
            # actor per actor_cpus slot of the cluster's alive nodes, following machines
            # that join and leave, within min_actors .. max_actors (num_actors unused)
            actors="fixed",
            min_actors=1,  # "auto": the fewest actors the launcher asks for
            max_actors=0,  # "auto": the most (0: no bound)
        )
    )
    # The single-process trainer only (python -m distrl.local; see distrl/local.py).
    c.local = ml_collections.ConfigDict(
        dict(
            # iterations (rollouts of T x num_actors*num_envs) between evaluations; 0 (auto):
            # evaluator.every_env_steps in iterations, as the distributed evaluator's
            # cadence, or every iteration where that is 0 (an evaluation on wall time)
            eval_every=0,
            iterations_per_call=200,  # iterations per jitted call (a log line after each)
            # XLA backend optimisation level; -1: XLA's default (2). Level 0 compiled
            # 0.4-1.3 s faster and stepped 3-4x slower on every preset measured
            # (benchmarks/README.md, "Issue 30: the single-process trainer at its defaults")
            xla_opt_level=-1,
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


def gymnasium_taxi_to_optimum(algorithm: str) -> ml_collections.ConfigDict:
    """The base of configs/*_gymnasium_taxi.py: gymnasium's Taxi-v4 (v3's tables and
    rewards: v4, gymnasium 1.3.0's, changed only is_rainy and fickle_passenger;
    gymnasium 1.3.0 has no Taxi-v3), stepped in Python by the actors (16 copies each),
    discount 0.99, a run that stops at a confirmed 98% of pi*'s undiscounted expected
    return over Taxi's 300 start states (+7.93 from the tables: `exact.return_target`,
    a mean return of +7.77 or more, the lower bound of 10,000 greedy episodes' 95%
    interval), 1,000-episode evaluations every 50k env steps (played on the
    evaluator's host) and a 3M env step / 900 s budget."""
    c = base_config(algorithm)
    c.env.name = "gymnasium:Taxi-v4"
    c.actor.num_envs = 16
    c.agent.discount = 0.99
    c.evaluator.update(
        dict(
            target_success=0.0,
            target_of_optimal=0.98,
            optimal_measure="return",
            every_env_steps=50_000,
        )
    )
    c.budget.update(dict(env_steps=3_000_000, seconds=900.0))
    return c


# MinAtar's network (Young & Tian 2019): one 3x3 conv of 16 channels, a dense layer of
# 128, ReLU; the agent fields of configs/*_breakout.py.
MINATAR_NETWORK = dict(
    torso="conv", conv_channels=(16,), conv_kernel=3, hidden_sizes=(128,), activation="relu"
)


def to_return(algorithm: str, env_name: str, target_return: float, confirm_envs: int = 1000):
    """The base of the configs of an env with a return target
    (configs/*_cartpole.py, *_breakout.py, and through `gymnasium_cartpole_to_475`
    configs/*_gymnasium_cartpole.py): `env_name`, a run that stops once the greedy
    mean return's 95% lower bound over `confirm_envs` episodes reaches `target_return`,
    100-episode evaluations every 8,192 env steps (distrl.local's too: its
    local.eval_every follows evaluator.every_env_steps; machine-independent),
    discount 0.99 and a 2M env step / 900 s budget."""
    c = base_config(algorithm)
    c.env.name = env_name
    c.agent.discount = 0.99
    c.evaluator.update(
        dict(
            target_return=float(target_return),
            num_envs=100,
            confirm_envs=confirm_envs,
            every_env_steps=8_192,
        )
    )
    c.budget.update(dict(env_steps=2_000_000, seconds=900.0))
    return c


def gymnasium_cartpole_to_475(algorithm: str) -> ml_collections.ConfigDict:
    """The base of configs/*_gymnasium_cartpole.py: `to_return` on gymnasium's
    CartPole-v1 (stepped in Python by the actors, 16 copies each) to 475, routine
    evaluations every 50k env steps (the evaluator plays them on its host: 1,000
    episodes of 500 steps are half a million env steps of its own)."""
    c = to_return(algorithm, "gymnasium:CartPole-v1", 475.0)
    c.actor.num_envs = 16
    c.agent.hidden_sizes = (64, 64)
    c.evaluator.every_env_steps = 50_000
    return c


def make_env(config) -> envs.Environment:
    """The env `config.env.name` names: the built-in gridworld (from env.map, slippery,
    time_limit, rewards), a user's factory 'module.path:function' called with
    env.kwargs, 'gymnax:<id>' or 'gymnasium:<id>' (an env stepped in Python:
    `envs.host_env`). Any failure to build it is a ConfigError naming it."""
    e = config.env
    if e.name != GRIDWORLD:
        try:
            return factory.build(e.name, factory.parse_kwargs(e.kwargs))
        except factory.FactoryError as err:
            raise ConfigError(f"config.env.name={e.name!r}: {err}") from None
    _check(
        e.kwargs.strip() in ("", "{}"),
        f"config.env.kwargs={e.kwargs!r}: keyword arguments of a factory env "
        f"(env.name='module:factory' or 'gymnax:<id>'); the gridworld takes env.map, "
        f"env.slippery, env.time_limit and env.rewards; need '{{}}'",
    )
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


def make_agent(config) -> agents.Agent:
    """The agent of the config's algorithm on its env."""
    return agents.make_agent(make_agent_config(config), make_env(config).spec)


def pipeline(config) -> pipelines.Pipeline:
    """The experiment's pipeline (`distrl.pipelines`): its agent config's."""
    return pipelines.of(make_agent_config(config))


# Fields added after runs were saved, with the value those runs had (their items and
# replay checkpoints have that layout): what `upgrade` fills in.
# What evaluator.target_of_optimal is a fraction of (`exact.Optimum`'s figure at the start).
OPTIMAL_MEASURES = ("success", "return")

ADDED_LATER = {
    "replay.item_steps": 1,
    "learner.batches_per_read": 1,
    "learner.updates_in_flight": 0,
    "evaluator.every_env_steps": 0,
    "env.name": GRIDWORLD,
    "env.kwargs": "{}",
    "env.vector": "sync",
    "env.step_timeout_s": 60.0,
    "evaluator.target_return": 0.0,
    "evaluator.optimal_measure": "success",
    # runs before the conv torso flattened every observation into the MLP
    "agent.torso": "mlp",
    "agent.conv_channels": (16,),
    "agent.conv_kernel": 3,
    # runs before actors followed a Ray cluster
    "ray.actors": "fixed",
    "ray.min_actors": 1,
    "ray.max_actors": 0,
}


def upgrade(saved: dict) -> dict:
    """A saved config (flat {'a.b': value}) of any earlier distrl as this version's: each
    field added since (`ADDED_LATER`) with the value that run had. The one place old
    configs are read differently; nothing downstream supplies a default."""
    return {**ADDED_LATER, **saved}


def from_dict(saved: dict) -> ml_collections.ConfigDict:
    """A saved config (config.json) as a typed config of its algorithm's base.

    A field added after the run was saved takes the value that run had (`upgrade`:
    `replay.item_steps` 1, the layout of its items and replay checkpoints).
    ConfigError when it is not a dict, names an unknown algorithm, lacks any other
    field (an older distrl wrote it) or has one the base does not know, or a value
    of the wrong type.
    """
    if not isinstance(saved, dict):
        raise ConfigError(f"a saved config must be a JSON object, got {type(saved).__name__}")
    config = base_config(saved.get("algorithm"))
    saved = _nest(upgrade(flatten(saved)))
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
    env = make_env(config)
    _check_ranges(config)
    pipelines.of(agent_config).validate(config, agent_config, env)
    _validate_budget_and_evaluator(config)
    check_env(config, env)
    _validate_ray(config)
    _validate_restart(config)


def success_target(config, has_success: bool) -> float:
    """The success target a run stops at (0: none): evaluator.target_success, or with
    AUTO (the default) 1.0 on an env with a success signal and none on one without."""
    value = float(config.evaluator.target_success)
    if value == AUTO:
        return 1.0 if has_success else 0.0
    return value


def targets(config, env, best) -> tuple:
    """(success, mean return) a run stops at, 0 for none: `success_target` and
    evaluator.target_return, or with evaluator.target_of_optimal its fraction of pi*'s
    figure at the start (`exact.at_start`; `best`: `exact.Optimum` of env's tabular
    model for the agent's discount) in place of the one optimal_measure names, the
    success target (`success`) or the return target (`return`: `exact.return_target`,
    and no success target)."""
    e = config.evaluator
    success = success_target(config, envs.success_signal(env) is not None)
    target_return = float(e.target_return)
    if e.target_of_optimal and best is not None:
        model = envs.tabular_model(env)
        if e.optimal_measure == "return":
            optimal = exact.at_start(model, best.returns)
            success, target_return = 0.0, exact.return_target(optimal, e.target_of_optimal)
        else:
            success = float(e.target_of_optimal * exact.at_start(model, best.success))
    return float(success), target_return


def check_env(config, env) -> None:
    """ConfigError when the run needs what `env` lacks (`distrl.envs.interface`): a
    success target set (0..1) needs the env's success signal, a target of the optimum
    its tabular model (for the exact optimum) as well; the default success target
    (AUTO) applies only where there is a signal, and a run needs some target or
    budget to end on. The gridworld has both. A conv
    torso (config.agent.torso) needs image observations [H, W, C]."""
    _check(
        isinstance(env, envs.Environment) or host_env.is_host_env(env),
        f"{type(env).__name__} is not an environment: need spec, reset, step and observe "
        f"(distrl.envs.interface)",
    )
    v = config.env.vector
    _check(v in ("sync", "async"), f"config.env.vector={v!r}; need 'sync' or 'async'")
    _check(
        v == "sync" or host_env.is_host_env(env),
        f"config.env.vector={v!r}: only an env stepped in Python (gymnasium) has copies to "
        f"put in subprocesses; {config.env.name!r} is stepped inside the actors' jit",
    )
    e = config.evaluator
    kind = type(env).__name__
    _check(
        e.target_success <= 0 or envs.success_signal(env) is not None,
        f"config.evaluator.target_success={e.target_success}: the env ({kind}) has no "
        f"success signal; leave it at -1 (the default: a success target only where there "
        f"is one) or 0 and stop on config.evaluator.target_return (the mean return) or a "
        f"budget (config.budget)",
    )
    _check(
        success_target(config, envs.success_signal(env) is not None)
        or e.target_of_optimal
        or e.target_return
        or config.budget.env_steps
        or config.budget.learner_steps
        or config.budget.seconds,
        "config.budget sets no limit and config.evaluator sets no target: "
        "the run would never stop; set one of them",
    )
    on_success = e.optimal_measure == "success"
    _check(
        not e.target_of_optimal
        or (
            envs.tabular_model(env) is not None
            and (not on_success or envs.success_signal(env) is not None)
        ),
        f"config.evaluator.target_of_optimal={e.target_of_optimal}: the env ({kind}) has no "
        f"tabular model{' with a success signal' if on_success else ''}, so no exact "
        f"optimum; set it to 0 and stop on a budget (config.budget)",
    )
    try:
        networks.torso_kind(make_agent_config(config).torso, env.spec.observation_shape)
    except ValueError as err:
        raise ConfigError(f"config.agent.{err}") from None
    try:
        agents.check_actions(make_agent_config(config), env)
    except ValueError as err:
        raise ConfigError(f"config.algorithm={config.algorithm!r}: {err}") from None


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
    "local.eval_every": 0,
    "local.iterations_per_call": 1,
    "local.xla_opt_level": -1,
}


def _check_ranges(config) -> None:
    for key, low in _LOWEST.items():
        _at_least(config, key, low)
    _check(config.seed < 2**31, f"config.seed={config.seed}; need 0 .. 2**31-1")
    timeout = config.env.step_timeout_s
    _check(timeout >= 0, f"config.env.step_timeout_s={timeout}; need >= 0 seconds (0: no limit)")
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


RAY_ACTORS = ("fixed", "auto")


def _validate_ray(config) -> None:
    r = config.ray
    _check(r.actor_cpus > 0, f"config.ray.actor_cpus={r.actor_cpus}; need > 0")
    _check(r.actors in RAY_ACTORS, f"config.ray.actors={r.actors!r}; valid: {RAY_ACTORS}")
    _check(
        isinstance(r.min_actors, int) and r.min_actors >= 1,
        f"config.ray.min_actors={r.min_actors!r}; need an integer >= 1",
    )
    _check(
        isinstance(r.max_actors, int) and (r.max_actors == 0 or r.max_actors >= r.min_actors),
        f"config.ray.max_actors={r.max_actors!r}; need 0 (no bound) or an integer >= "
        f"config.ray.min_actors={r.min_actors}",
    )
    _check(
        r.actors != "auto" or config.actor.chunks_per_version == 0,
        f"config.ray.actors='auto' with config.actor.chunks_per_version="
        f"{config.actor.chunks_per_version}: gated actors (rounds of every actor's chunks) "
        f"would stall as the count changes; set chunks_per_version=0 or ray.actors='fixed'",
    )
    _check(
        r.learner_device in LEARNER_DEVICES,
        f"config.ray.learner_device={r.learner_device!r}; valid: {LEARNER_DEVICES}",
    )


def _validate_budget_and_evaluator(config) -> None:
    e, bud = config.evaluator, config.budget
    _check(e.every_seconds > 0, f"config.evaluator.every_seconds={e.every_seconds}; need > 0")
    _check(
        isinstance(e.every_env_steps, int) and e.every_env_steps >= 0,
        f"config.evaluator.every_env_steps={e.every_env_steps!r}; need an integer >= 0 "
        f"(0 = every every_seconds of wall time)",
    )
    for name in ("num_envs", "confirm_envs"):
        _check(
            1 <= e[name] <= MAX_EVAL_EPISODES,
            f"config.evaluator.{name}={e[name]:,} episodes; need 1 .. {MAX_EVAL_EPISODES:,} "
            f"(10**6 put the 95% interval within +-0.001)",
        )
    _check(
        0.0 <= e.target_of_optimal <= 1.0,
        f"config.evaluator.target_of_optimal={e.target_of_optimal}; need 0..1 (0 disables)",
    )
    _check(
        e.optimal_measure in OPTIMAL_MEASURES,
        f"config.evaluator.optimal_measure={e.optimal_measure!r}; valid: {OPTIMAL_MEASURES}",
    )
    _check(
        not (e.target_of_optimal and e.optimal_measure == "return" and e.target_return),
        f"config.evaluator.target_return={e.target_return:g} with target_of_optimal="
        f"{e.target_of_optimal} of the optimal return: two return targets; set one",
    )
    _check(
        0.0 <= e.target_success <= 1.0 or e.target_success == AUTO,
        f"config.evaluator.target_success={e.target_success}; need 0..1 (0 disables) "
        f"or -1 (1.0 where the env has a success signal)",
    )
    for name in ("env_steps", "learner_steps", "seconds"):
        _check(bud[name] >= 0, f"config.budget.{name}={bud[name]}; need >= 0 (0 = no limit)")
    log, ckpt = config.log.every_seconds, config.checkpoint.every_seconds
    _check(log > 0, f"config.log.every_seconds={log}; need > 0")
    _check(ckpt >= 0, f"config.checkpoint.every_seconds={ckpt}; need >= 0 (0 = only at the end)")
