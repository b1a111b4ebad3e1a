"""Ceilings: each pipeline stage's work alone, in one process, measured first.

- rollout: `rollout.make_rollout` at the actor's [T, B], params fixed, no I/O;
- actor compute: the same plus the actor's item function and the copy to the host
  (everything an actor does per chunk except Reverb and the params RPC);
- scan (`scan_ceiling`): a jitted scan of gymnax's own step and the same network and
  policy, the ceiling of the rollout of a gymnax preset (MinAtar's, a recurrent one's);
- update: the agent's jitted update on device-resident batches of the learner's
  shape (DQN QTransition [N], PPO Transition [T, M*B]), via `benchmarks.learner`;
- Reverb insert: the real `replay.Writer` writing the real items of a rollout
  (DQN: T/k items of [k, B] per call, k = replay.item_steps; PPO: one [T, B]
  chunk) to a server in a child process; Reverb read: the learner's
  `replay.iterate_batches` on that table once filled, plus the pipeline's
  `learner_batch` (also per CPU-second of this process: the host work of a learner).
Every figure is in env steps (= transitions) per second, plus calls per second.
"""

import functools

import jax
import numpy as np
import reverb

from benchmarks import learner as learner_bench
from benchmarks import tables
from benchmarks.common import measure_rate, measure_rates
from distrl import experiment as experiment_lib
from distrl import replay
from distrl.acting import rollout
from distrl.agents import recurrent
from distrl.nodes.actor import _split_key, make_act
from distrl.types import CoreChunk

_EPSILON = 0.1  # a mid-training exploration rate; it changes no shapes


class ActorWork:
    """An actor's pure parts for `config`, compiled once: rollout, item function, params."""

    def __init__(self, config):
        self.config = config
        experiment = experiment_lib.Experiment(config)
        env, agent = experiment.env, experiment.agent
        self.params = agent.init(jax.random.PRNGKey(config.seed)).params
        policy = rollout.policy_of(agent)  # a recurrent core's state rides in the carry
        self.unroll = rollout.make_rollout(env, policy, config.actor.unroll_length)
        self.pipeline = experiment_lib.Experiment(config).pipeline
        self.act = make_act(self.unroll, self.pipeline.item_fn(agent.config, config, env))
        self.carry = rollout.init_carry(env, jax.random.PRNGKey(1), config.actor.num_envs, policy)
        self.key, self.tail = jax.random.PRNGKey(2), None
        self._pending = None  # the last call's packed output, copied by the next call

    def chunk(self):
        """One rollout call: (Transition [T, B] on device, RolloutStats)."""
        self.key, key = _split_key(self.key)  # as the actor does
        self.carry, chunk, stats = self.unroll(self.params, self.carry, key, _EPSILON)
        return chunk, stats

    def items(self):
        """One rollout call's host items, as the actor gets them (its `make_act`: items
        and statistics leave the device as one buffer), and as it pipelines them: the
        next rollout is dispatched before the previous one is copied and unpacked, so
        XLA computes while the host copies (the rollout ceiling's calls overlap too).
        The first call returns its own items."""
        self.key, key = _split_key(self.key)
        (self.carry, self.tail), output = self.act(
            self.params, self.carry, key, _EPSILON, self.tail
        )
        previous, self._pending = self._pending, output
        items, _ = self.act.unpack(output if previous is None else previous)
        return items


def rollout_and_actor_compute(work: ActorWork, seconds: float) -> tuple[dict, dict]:
    """Env steps/s of the jitted rollout alone at the actor's [T, B], and of rollout +
    items + the copy to the host (an actor without Reverb), in alternating slices
    (`seconds` each)."""
    rates = measure_rates(
        {
            "rollout": (lambda: work.chunk()[1], jax.block_until_ready),
            "actor_compute": (work.items, lambda out: out),
        },
        seconds,
    )
    return _steps(work.config, rates["rollout"]), _steps(work.config, rates["actor_compute"])


def scan_ceiling(config):
    """A jitted scan of T steps of B gymnax envs (gymnax's auto-resetting `step`) acting
    with the agent's acting policy (PPO's sample, DQN's and R2D2's epsilon-greedy at
    epsilon 0.1): (call() -> rewards [T, B]). The actor's rollout ceiling: the same env
    (less the elements `env.hidden_observation` hides), network and policy, nothing
    else; a recurrent network carries its core's state, reset to the initial state
    where an episode ended, as the actor's rollout does. The network's params are an
    argument of the jitted call, as the actor's are: closed over, XLA folds them into
    the code as constants, which no actor acting with fresh params can: a ceiling of
    constants would be faster than any actor could be."""
    import gymnax  # noqa: PLC0415 - the ceiling is for gymnax envs

    env, params = gymnax.make(config.env.name.removeprefix("gymnax:"))
    agent = experiment_lib.Experiment(config).agent
    net_params = agent.init(jax.random.PRNGKey(0)).params
    t, b = config.actor.unroll_length, config.actor.num_envs
    hidden = tuple(config.env.hidden_observation)
    size = int(np.prod(env.observation_space(params).shape))
    kept = np.setdiff1d(np.arange(size), hidden)
    core = agent.core

    def visible(obs):
        return obs.reshape(b, -1)[:, kept] if hidden else obs

    def act(net_params, key, obs, state):  # the agent's acting policy: sampled, or
        if core is None:  # epsilon-greedy
            return agent.policy(net_params, key, obs, _EPSILON)[0], state
        actions, _, state = core.policy(net_params, key, obs, _EPSILON, state)
        return actions, state

    def step(net_params, carry, key):
        obs, env_state, state = carry
        keys = jax.random.split(key, b + 1)  # the policy's, then each env's
        action, state = act(net_params, keys[0], visible(obs), state)
        obs, env_state, reward, terminated, truncated, _ = jax.vmap(env.step, (0, 0, 0, None))(
            keys[1:], env_state, action, params
        )
        if core is not None:
            state = recurrent.reset_where(terminated | truncated, state, core.initial_state(b))
        return (obs, env_state, state), reward

    @jax.jit
    def run(net_params, carry, key):  # the key split inside, as the actor's one dispatch
        key, scan_key = jax.random.split(key)  # per chunk; the params an argument, as the
        carry, reward = jax.lax.scan(  # actor's are (constants would fold into the code)
            functools.partial(step, net_params), carry, jax.random.split(scan_key, t)
        )
        return carry, key, reward

    obs, env_state = jax.vmap(env.reset, (0, None))(
        jax.random.split(jax.random.PRNGKey(1), b), params
    )
    state = () if core is None else core.initial_state(b)
    holder = {"carry": (obs, env_state, state), "key": jax.random.PRNGKey(2)}

    def call():
        holder["carry"], holder["key"], reward = run(net_params, holder["carry"], holder["key"])
        return jax.block_until_ready(reward)

    return call


def against_scan(config, seconds: float, repeats: int = 5) -> dict:
    """The actor's rollout and its compute (`ActorWork`) against `scan_ceiling`, in
    alternating slices: {'rollout', 'actor_compute', 'scan': {'env_steps_per_s'},
    'shape'}."""
    work = ActorWork(config)
    rates = measure_rates(
        {
            "rollout": (lambda: jax.block_until_ready(work.chunk()[1]), lambda out: out),
            "actor_compute": (work.items, lambda out: out),  # its output is on the host
            "scan": (scan_ceiling(config), lambda out: out),
        },
        seconds,
        repeats,
    )
    t, b = config.actor.unroll_length, config.actor.num_envs
    out = {k: {"env_steps_per_s": v * t * b} for k, v in rates.items()}
    return dict(out, shape=f"[{t}, {b}]")


def update_ceiling(config, seconds: float) -> dict:
    """Updates/s and samples/s of the jitted update at the learner's batch shape: the
    pipeline's `learner_batch` of `items_per_batch` items of random content."""
    experiment = experiment_lib.Experiment(config)
    agent, pipeline = experiment.agent, experiment.pipeline
    rng = np.random.default_rng(0)
    batches = [pipeline.learner_batch(b) for b in learner_bench.random_batches(experiment, 4, rng)]
    rate = learner_bench.update_rate(agent, batches, jax.devices()[0], seconds)
    rows = pipeline.batch_rows(config)
    steps = batches[0].chunk if isinstance(batches[0], CoreChunk) else batches[0]
    shape = list(steps.action.shape)
    return {"updates_per_s": rate, "samples_per_s": rate * rows, "batch": str(shape)}


def reverb_ceilings(work: ActorWork, address: str, seconds: float) -> dict:
    """Insert and read ceilings against the (empty, unlimited) table at `address`."""
    config, pipeline = work.config, work.pipeline
    chunks = [work.items() for _ in range(5)][1:]  # a DQN first chunk is short if n > 1
    client = reverb.Client(address)
    writer = replay.Writer(client, lambda: False)
    state = {"i": 0}

    def insert():
        pipeline.write(writer, chunks[state["i"] % len(chunks)], 0)
        state["i"] += 1

    insert_calls = measure_rate(insert, seconds)
    writer.close()
    fill = tables.table_counts(client)
    signature = pipeline.signature(config, experiment_lib.Experiment(config).env)
    batches = replay.iterate_batches(address, signature, pipeline.reading(config), lambda: False)

    def read():
        return pipeline.learner_batch(next(batches)[0].data.data)

    cpu = {}  # the reading's CPU in this process: the learner's host work per batch
    read_batches = measure_rate(read, seconds, cpu=cpu)
    t, b = config.actor.unroll_length, config.actor.num_envs
    items_per_call = t * b // pipeline.transitions_per_item(config)
    batch_transitions = pipeline.batch_rows(config)
    return {
        "insert_calls_per_s": insert_calls,
        "insert_items_per_s": insert_calls * items_per_call,
        "insert_steps_per_s": insert_calls * t * b,
        "read_batches_per_s": read_batches,
        "read_samples_per_s": read_batches * batch_transitions,
        "read_samples_per_cpu_s": batch_transitions / cpu["step"],
        "table_items": fill["size"],
    }


def _steps(config, calls_per_s: float) -> dict:
    """A rollout call rate as env steps/s at the config's [T, B]."""
    t, b = config.actor.unroll_length, config.actor.num_envs
    return {"calls_per_s": calls_per_s, "steps_per_s": calls_per_s * t * b, "shape": f"[{t}, {b}]"}


def measure_actors(configs, seconds: float) -> dict:
    """The rollout and actor compute ceilings of each config ({name: config}) ->
    {name: {'rollout', 'actor_compute'}}: the env presets' actor rows."""
    out = {}
    for name, config in configs.items():
        rollout_rate, actor_rate = rollout_and_actor_compute(ActorWork(config), seconds)
        out[name] = {"rollout": rollout_rate, "actor_compute": actor_rate}
    return out


def measure_updates(configs, seconds: float) -> dict:
    """The update ceiling of each config ({name: config}) -> {name: {'update'}}: the
    learner presets' rows (`rows.LEARNERS`)."""
    return {name: {"update": update_ceiling(config, seconds)} for name, config in configs.items()}


def measure_all(configs, seconds: float) -> dict:
    """Every ceiling of each config ({name: config}) -> {name: {'rollout',
    'actor_compute', 'update', 'reverb'}}; one Reverb server process serves all."""
    out = {}
    with tables.server_process(configs) as addresses:
        for name, config in configs.items():
            work = ActorWork(config)
            rollout_rate, actor_rate = rollout_and_actor_compute(work, seconds)
            out[name] = {
                "rollout": rollout_rate,
                "actor_compute": actor_rate,
                "update": update_ceiling(config, seconds),
                "reverb": reverb_ceilings(work, addresses[name], seconds),
            }
    return out
