"""The single-process trainer against one fused jitted loop.

`distrl.local` trains a replay preset (configs/sac_pendulum.py: SAC on gymnax
Pendulum-v1) as a user's command does (`local.train`): jitted calls of
`local.iterations_per_call` iterations, each a rollout of T x B env steps and
`local_updates` SAC updates, with its evaluations, stop rule and budget checks. The
ceiling is the same iterations as ONE jitted `lax.scan` with nothing else: the
agent's policy over T x B steps (`rollout.unroll`), the one-step transitions into a
replay buffer in device arrays, the same number of updates on uniform samples of the
same batch; same network, settings and seed, no evaluation, no stop rule, no min-size
guard (its first call fills the buffer, as the trainer's first call does).

The two run one after the other in one process, the trainer first: its figure is env
steps/s over its calls after its first block of `iterations_per_call` iterations
(`TrainResult.history`; distrl.local sizes its calls by time, so the first block may
take several calls), the ceiling's over `calls` calls after its first. The first
block of each (compilation, the buffer's fill before `replay.min_size`) is left out.

    python -m benchmarks.fused [--calls=3] [--config.local.iterations_per_call=32]

`measure` sets the config's budget to the calls it times (and no target is reached in
so few env steps).
"""

import json
import os
import sys
import time

if __package__ in (None, ""):  # `python benchmarks/fused.py`
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax
import jax.numpy as jnp
from absl import flags

from benchmarks.common import algo_overrides, load_config
from distrl import experiment as experiment_lib
from distrl import local
from distrl.acting import rollout
from distrl.agents import nstep
from distrl.agents.replay_buffer import replay_add, replay_init, replay_sample
from distrl.types import QTransition

PRESET = "sac_pendulum"  # the replay preset of a JAX Box env (configs/sac_pendulum.py)


def ceiling_program(config):
    """(init(key) -> carry, call(carry, key) -> carry): `local.iterations_per_call`
    iterations of rollout, buffer add and updates as one jitted program."""
    experiment = experiment_lib.Experiment(config)
    env, agent = experiment.env, experiment.agent
    cfg = local.Settings.of(experiment_lib.make(config))
    if agent.config.n_step != 1:
        raise ValueError(f"the ceiling is one-step (agent.n_step={agent.config.n_step})")

    def init(key):
        agent_key, env_key = jax.random.split(key)
        spec = env.spec
        obs0 = jnp.zeros(spec.observation_shape, spec.observation_dtype)
        action0 = jnp.zeros(spec.action_shape, spec.action_dtype)
        example = QTransition(obs0, action0, jnp.float32(0), jnp.float32(0), obs0)
        return (
            agent.init(agent_key),
            rollout.init_carry(env, env_key, cfg.num_envs),
            replay_init(example, cfg.replay_capacity),
        )

    def iteration(carry, key):
        state, rc, buffer = carry
        roll_key, update_key = jax.random.split(key)
        rc, traj, _ = rollout.unroll(
            env, agent.policy, cfg.rollout_length, state.params, rc, roll_key, 0.0
        )
        rows = nstep.n_step_transitions(traj, 1, agent.config.discount)
        buffer = replay_add(buffer, jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:]), rows))

        def one(s, k):
            return agent.update(s, replay_sample(buffer, k, cfg.batch_size))[0], None

        state, _ = jax.lax.scan(one, state, jax.random.split(update_key, cfg.updates_per_iteration))
        return (state, rc, buffer), None

    def call(carry, key):
        keys = jax.random.split(key, cfg.iterations_per_call)
        return jax.lax.scan(iteration, carry, keys)[0]

    return jax.jit(init), jax.jit(call, donate_argnums=0), cfg


def measure(config, calls: int, name: str = PRESET) -> dict:
    """The trainer's and the ceiling's env steps/s over `calls` blocks of iterations after
    their first, one after the other (see the module docstring); 'local' and 'fused'
    entries, the shape.
    `name`: the config's preset, for the table."""
    init, call, cfg = ceiling_program(config)
    per_call = cfg.iterations_per_call * cfg.rollout_length * cfg.num_envs
    config.budget.update(dict(env_steps=(calls + 1) * per_call, seconds=0.0, learner_steps=0))
    result = local.train(config)
    history = result.history  # (env steps, seconds since the start, exact) per call
    first = next(i for i, (steps, _, _) in enumerate(history) if steps >= per_call)
    steps = history[-1][0] - history[first][0]
    local_s = history[-1][1] - history[first][1]
    carry, key = init(jax.random.PRNGKey(config.seed)), jax.random.PRNGKey(1)
    fused_times = []
    for _ in range(calls + 1):
        key, call_key = jax.random.split(key)
        start = time.perf_counter()
        carry = jax.block_until_ready(call(carry, call_key))
        fused_times.append(time.perf_counter() - start)
    measured = fused_times[1:]
    fused_steps = per_call * len(measured)
    return {
        "config": name,
        "shape": f"[{cfg.rollout_length}, {cfg.num_envs}]",
        "iteration_steps": cfg.rollout_length * cfg.num_envs,
        "updates_per_iteration": cfg.updates_per_iteration,
        "iterations_per_call": cfg.iterations_per_call,
        "batch_size": cfg.batch_size,
        "eval_every": cfg.eval_every,
        "calls": calls,
        "local": {
            "steps_per_s": steps / local_s if local_s > 0 else None,
            "env_steps": steps,
            "seconds": local_s,
            "compile_s": result.compile_time,
            "first_block_s": history[first][1],
        },
        "fused": {
            "steps_per_s": fused_steps / sum(measured) if measured else None,
            "env_steps": fused_steps,
            "seconds": sum(measured),
            "first_call_s": fused_times[0],
        },
    }


def _flags():
    values = flags.FlagValues()
    flags.DEFINE_string(
        "algo", PRESET, "The replay preset (configs/<algo>.py).", flag_values=values
    )
    flags.DEFINE_integer(
        "calls", 3, "Calls measured after the first.", lower_bound=1, flag_values=values
    )
    return values


def main(argv=None) -> None:
    args = _flags()
    argv = [sys.argv[0], *(sys.argv[1:] if argv is None else argv)]
    overrides = algo_overrides(args, argv, __doc__)
    config = load_config(args.algo, overrides)
    print(json.dumps(measure(config, args.calls, args.algo), indent=1))


if __name__ == "__main__":
    main()
