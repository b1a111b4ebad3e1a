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

`validate` checks all of it before any node starts, in one pass, and raises
`ConfigError` naming the bad value and what would be valid. Each section is checked
by the module that reads it: the agent's by `distrl.agents` (as its dataclass is
built), env by `distrl.envs.section`, evaluator and budget by
`distrl.evaluator_config`, actor, learner and replay by `distrl.pipelines`, log by
`distrl.metrics`, checkpoint by `distrl.checkpoints.learner`, the launchers' sections (ray,
restart, local) by `distrl.launch_config`; the config's own fields here.
`distrl.resources` refuses what the machine cannot hold; `make_agent_config`,
`make_env` turn the config into the pure layers' objects; `from_dict` rebuilds a
saved config, `upgrade` brings an older one up to date.
"""

import contextlib
import dataclasses
import json
import math

import ml_collections

from distrl import (
    agents,
    checkpoints,
    envs,
    evaluator_config,
    launch_config,
    metrics,
    pipelines,
    spaces,
)
from distrl.envs import section as env_section
from distrl.errors import ConfigError, at_least
from distrl.errors import check as _check

LAUNCH_TYPES = ("local_mp", "test_mt", "ray")


def agent_section(algorithm: str) -> ml_collections.ConfigDict:
    """Every field of the preset's config dataclass, with the preset's values."""
    if algorithm not in agents.PRESETS:
        raise ConfigError(
            f"config.algorithm={algorithm!r} is unknown; valid: {', '.join(sorted(agents.PRESETS))}"
        )
    return ml_collections.ConfigDict(dataclasses.asdict(agents.make_config(algorithm)))


def _default_env(algorithm: str) -> str:
    takes = type(agents.make_config(algorithm)).ACTION_SPACES
    return env_section.GRIDWORLD if spaces.Discrete in takes else "gymnax:Pendulum-v1"


def base_config(algorithm: str) -> ml_collections.ConfigDict:
    """The defaults every experiment shares; `configs/*.py` override them."""
    c = ml_collections.ConfigDict()
    c.algorithm = algorithm  # a preset of distrl.agents.PRESETS (fixed by the config file)
    c.agent = agent_section(algorithm)  # the preset's dataclass fields (see distrl/agents/)
    c.seed = 0  # PRNG seed of every node (0 .. 2**31-1)
    c.env = ml_collections.ConfigDict(
        dict(
            # "gridworld" (the built-in, with the fields below) or a factory of your own,
            # 'module.path:function' (README, "Your own environment"); an agent of Box
            # actions only (SAC, TD3) starts on gymnax's Pendulum
            name=_default_env(algorithm),
            kwargs="{}",  # the factory's keyword arguments as a JSON object (not the gridworld's)
            # envs stepped in Python ('gymnasium:<id>' or a factory returning a gymnasium.Env):
            vector="sync",  # an actor's B copies: "sync" in its process, "async": a process each
            step_timeout_s=60.0,  # a vector step slower than this fails the actor (0: no limit)
            # elements of the flat observation the agent never sees, e.g. (1, 3): CartPole's
            # velocities (a task that needs memory); a JAX env's only
            hidden_observation=(),
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
    # actor.episode_window (REINFORCE, GRPO), replay.sequence_length and
    # learner.batch_sequences (R2D2, with the replay table's fields).
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
            target_success=evaluator_config.AUTO,
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
            # iterations per jitted call at most (each block of them has its own key);
            # calls are cut shorter to show progress and to keep budget.seconds
            iterations_per_call=200,
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


def mujoco(algorithm: str) -> ml_collections.ConfigDict:
    """The base of configs/*_mujoco.py: `to_return` on gymnasium's MuJoCo HalfCheetah-v5
    (stepped in Python by the actors, 4 sync copies each; `--config.env.name=
    gymnasium:Hopper-v5` for Hopper) with no return target: the 1M env step budget of
    the published references (and 3,600 s), evaluated on 10 greedy episodes as
    CleanRL's evaluation plays (1,000 steps each, on the evaluator's host), each one
    a candidate for the kept best (confirm_envs 10), every 5,120 env steps."""
    c = to_return(algorithm, "gymnasium:HalfCheetah-v5", 0.0, confirm_envs=10)
    c.actor.num_envs = 4
    c.evaluator.update(dict(num_envs=10, every_env_steps=5_120))
    c.budget.update(dict(env_steps=1_000_000, seconds=3600.0))
    return c


def make_env(config) -> envs.Environment:
    """The env `config.env.name` names: the built-in gridworld (from env.map, slippery,
    time_limit, rewards), a user's factory 'module.path:function' called with
    env.kwargs, 'gymnax:<id>' or 'gymnasium:<id>' (an env stepped in Python:
    `envs.host_env`). Any failure to build it is a ConfigError naming it
    (`envs.section.make`)."""
    return env_section.make(config.env)


def make_agent_config(config):
    """The agent's config dataclass, built from `config.agent` (every field)."""
    section = agent_section(config.algorithm)  # ConfigError for an unknown algorithm
    _check_keys(config.agent, section, "config.agent")
    with _agent_errors():
        return agents.make_config(config.algorithm, **config.agent.to_dict())


@contextlib.contextmanager
def _agent_errors():
    """An agent's ValueError (`agents.checks`) as the ConfigError naming its field."""
    try:
        yield
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
ADDED_LATER = {
    "replay.item_steps": 1,
    "learner.batches_per_read": 1,
    "learner.updates_in_flight": 0,
    "evaluator.every_env_steps": 0,
    "env.name": env_section.GRIDWORLD,
    "env.kwargs": "{}",
    "env.vector": "sync",
    "env.step_timeout_s": 60.0,
    "env.hidden_observation": (),
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


# Agent fields added later to some algorithms only (the actor-critics: their recurrent core,
# record_value): filled in where the saved algorithm's agent section has them.
ADDED_LATER_TO_AGENTS = {
    "agent.core": "none",  # runs before recurrent cores were feed-forward
    "agent.core_size": 128,
    # runs before the actors acted without the critic recorded V(s) in every item
    "agent.record_value": True,
    "agent.normalize_observations": False,  # runs before it fed raw observations
}


def upgrade(saved: dict) -> dict:
    """A saved config (flat {'a.b': value}) of any earlier distrl as this version's: each
    field added since (`ADDED_LATER`, and `ADDED_LATER_TO_AGENTS` where its algorithm has
    the field) with the value that run had. The one place old configs are read
    differently; nothing downstream supplies a default."""
    added = dict(ADDED_LATER)
    algorithm = saved.get("algorithm")
    if algorithm in agents.PRESETS:
        fields = agent_section(algorithm)
        added.update(
            {k: v for k, v in ADDED_LATER_TO_AGENTS.items() if k.split(".", 1)[1] in fields}
        )
    return {**added, **saved}


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
    """Raises ConfigError for any value that cannot work; returns None otherwise.

    One pass: the config's shape and types and its own fields here, then each section
    by the module that reads it."""
    base = base_config(config.algorithm)  # ConfigError for an unknown algorithm
    _check_keys(config, base, "config")
    _check_types(config, base)
    _check_own(config)  # seed, num_actors
    launch_config.validate(config)  # ray, restart, local
    agent_config = make_agent_config(config)
    env = make_env(config)
    check_env(config, env)  # env, evaluator, budget; the agent on this env
    pipelines.validate(config, agent_config, env)
    metrics.validate(config)
    checkpoints.learner.validate(config)


def check_env(config, env) -> None:
    """ConfigError when the run needs what `env` (config.env's, or one a caller supplies:
    `distrl.local`) lacks, or a value about it cannot work: the env section
    (`envs.section`), the evaluator's targets and the budget (`evaluator_config`), and
    the agent on this env (`agents.check_env`: a conv torso needs images [H, W, C])."""
    env_section.validate(config.env, env)
    evaluator_config.validate(config, env)
    with _agent_errors():
        agents.check_env(make_agent_config(config), env)
    try:  # the algorithm, not a field of it, is what cannot act in these actions
        agents.check_actions(make_agent_config(config), env)
    except ValueError as err:
        raise ConfigError(f"config.algorithm={config.algorithm!r}: {err}") from None


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


# The config's own fields: integers with their lowest value.
_LOWEST = {"num_actors": 1, "seed": 0}


def _check_own(config) -> None:
    at_least(config, _LOWEST)
    _check(config.seed < 2**31, f"config.seed={config.seed}; need 0 .. 2**31-1")
