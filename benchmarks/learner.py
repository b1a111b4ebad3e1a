"""Learner-only benchmark: jitted DQN and PPO updates on device-resident batches.

Needs no Reverb, Launchpad or TensorFlow: it imports jax, numpy and distrl's core
(`distrl.CORE`) only, so it runs on a GPU or TPU host with the core's current stack
(requirements-core.lock: Python 3.12, jax 0.11; `make setup-core`). For every device JAX
sees (the CPU always, a GPU when present) and every batch size it reports updates/s
and samples/s (transitions consumed per second). `benchmarks/ceilings.py` uses the
same functions for the learner ceilings of `make bench`.

    python benchmarks/learner.py                        # small CPU sweep
    python benchmarks/learner.py --dqn-batches=256,4096,65536 --ppo-chunks=2,64,1024
    python benchmarks/learner.py --config.agent.hidden_sizes='(256, 256)' --dqn.agent.n_step=3

The agents are configs/dqn.py's and configs/ppo.py's, with their agent fields
overridden as launch/train.py takes them: `--config.agent.<field>=<value>` for both,
`--dqn.agent.<field>=<value>` / `--ppo.agent.<field>=<value>` for one (the batch
shapes are this benchmark's flags, so no other section applies).
"""

import functools
import json
import os
import subprocess
import sys
import time

import jax
import numpy as np
from absl import flags

from distrl import agents, cli, envs
from distrl import config as config_lib
from distrl import experiment as experiment_lib
from distrl.types import QTransition, Transition

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchmarks.common import configs_of, load_config, measure_rate

ALGOS = ("dqn", "ppo")

FORBIDDEN = ("tensorflow", "reverb", "launchpad", "courier")


def random_dqn_batch(rng: np.random.Generator, obs_size: int, n: int) -> QTransition:
    """QTransition [N] of plausible gridworld data (one-hot obs, 4 actions)."""
    eye = np.eye(obs_size, dtype=np.float32)
    return QTransition(
        observation=eye[rng.integers(0, obs_size, n)],
        action=rng.integers(0, 4, n).astype(np.int32),
        reward=rng.choice(np.float32([0, 0, 0, 1, -1]), n),
        discount=rng.choice(np.float32([0.99, 0.99, 0.0]), n),
        next_observation=eye[rng.integers(0, obs_size, n)],
    )


def random_ppo_batch(
    rng: np.random.Generator, obs_size: int, t: int, n: int, with_value: bool
) -> Transition:
    """Transition [T, N] with PPO's behaviour extras {'log_prob'} [T, N], and 'value'
    with_value (what the actors record, `agents.base.records_value`)."""
    eye = np.eye(obs_size, dtype=np.float32)
    shape = (t, n)
    return Transition(
        observation=eye[rng.integers(0, obs_size, shape)],
        action=rng.integers(0, 4, shape).astype(np.int32),
        reward=rng.choice(np.float32([0, 0, 0, 1, -1]), shape),
        discount=rng.choice(np.float32([1, 1, 1, 0]), shape),
        last=rng.random(shape) < 0.1,
        next_observation=eye[rng.integers(0, obs_size, shape)],
        extras={
            "log_prob": np.full(shape, np.log(0.25), np.float32),
            **({"value": np.zeros(shape, np.float32)} if with_value else {}),
        },
    )


def random_batches(experiment, count: int, rng) -> list:
    """`count` learner batches of random items of the pipeline's example shape: actions
    in range, booleans about 1 in 20 true (episode ends), numbers in [0, 1)."""
    config, env, pipeline = experiment.config, experiment.env, experiment.pipeline
    k = pipeline.items_per_batch(config)
    example = pipeline.example_item(config, env).data

    def fill(x):
        shape = (k,) + x.shape
        if x.dtype == np.bool_:
            return rng.random(shape) < 0.05
        if np.issubdtype(x.dtype, np.integer):
            return rng.integers(0, env.spec.num_actions, shape, dtype=x.dtype)
        return rng.random(shape, dtype=np.float32).astype(x.dtype)

    return [jax.tree.map(fill, example) for _ in range(count)]


def update_rate(agent, batches, device, seconds: float) -> float:
    """Updates/s of `agent.update` cycling over `batches`, all resident on `device`."""
    state = jax.device_put(agent.init(jax.random.PRNGKey(0)), device)
    batches = [jax.device_put(b, device) for b in batches]
    holder = {"state": state, "i": 0}

    def step():
        batch = batches[holder["i"] % len(batches)]
        holder["state"], metrics = agent.update(holder["state"], batch)
        holder["i"] += 1
        return metrics

    return measure_rate(step, seconds, sync=jax.block_until_ready)


def dqn_update_rate(
    obs_size: int, batch_size: int, device, seconds: float, agent_config=None
) -> dict:
    """{'updates_per_s', 'samples_per_s'} of the DQN update at batch size N."""
    env_spec = agents.EnvSpec(obs_size, envs.NUM_ACTIONS)
    agent = agents.make_agent(agent_config or agents.make_config("dqn"), env_spec)
    rng = np.random.default_rng(0)
    batches = [random_dqn_batch(rng, obs_size, batch_size) for _ in range(4)]
    rate = update_rate(agent, batches, device, seconds)
    return {"updates_per_s": rate, "samples_per_s": rate * batch_size}


def ppo_update_rate(
    obs_size: int, t: int, n: int, device, seconds: float, agent_config=None
) -> dict:
    """{'updates_per_s', 'samples_per_s'} of the PPO update on Transition [T, N]."""
    env_spec = agents.EnvSpec(obs_size, envs.NUM_ACTIONS)
    agent = agents.make_agent(agent_config or agents.make_config("ppo"), env_spec)
    rng = np.random.default_rng(0)
    with_value = agents.base.records_value(agent.config)
    batches = [random_ppo_batch(rng, obs_size, t, n, with_value) for _ in range(2)]
    rate = update_rate(agent, batches, device, seconds)
    return {"updates_per_s": rate, "samples_per_s": rate * t * n}


def sweep(
    dqn_batches,
    ppo_chunks,
    seconds: float,
    obs_size: int = 16,
    t: int = 16,
    envs_per_chunk: int = 64,
    agent_configs=None,
) -> list:
    """Rows for every device x algorithm x size (PPO: M chunks of [T, B] -> [T, M*B]);
    `agent_configs`: {'dqn' | 'ppo': agent config} (default: the presets')."""
    agent_configs = agent_configs or {}
    sizes = [
        ("dqn", f"[{n}]", functools.partial(dqn_update_rate, obs_size, n)) for n in dqn_batches
    ]
    sizes += [
        (
            "ppo",
            f"[{t}, {m * envs_per_chunk}]",
            functools.partial(ppo_update_rate, obs_size, t, m * envs_per_chunk),
        )
        for m in ppo_chunks
    ]
    rows = []
    for device in _devices():
        for algo, batch, rate in sizes:
            figures = rate(device, seconds, agent_configs.get(algo))
            rows.append(dict(device=_name(device), algo=algo, batch=batch, **figures))
    return rows


def _name(device) -> str:
    """'cpu:0', 'gpu:0' (with the device kind for accelerators)."""
    kind = "" if device.platform == "cpu" else f" ({device.device_kind})"
    return f"{device.platform}:{device.id}{kind}"


def _devices() -> list:
    """The first device of every platform JAX sees (CPU always, GPU when present)."""
    devices = {}
    for backend in ("cpu", "gpu", "tpu"):
        try:
            devices[backend] = jax.devices(backend)[0]
        except RuntimeError:
            pass
    return list(devices.values())


_IMPORT_CHECK = """
import importlib.abc, json, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in {forbidden!r}:
            raise ImportError('blocked: ' + name)
if {block}:
    sys.meta_path.insert(0, Block())
import importlib, distrl
for name in distrl.core_modules():
    importlib.import_module(name)
loaded = sorted({{m.split('.')[0] for m in sys.modules}} & set({forbidden!r}))
print(json.dumps(loaded))
"""


def import_check() -> dict:
    """What importing distrl's core (`distrl.core_modules`) loads, in fresh interpreters.

    'loaded': forbidden top-level modules present after a plain import (on a host
    with TensorFlow installed, tensorflow-probability's JAX backend imports it
    optionally, for docstrings). 'works_without': True when the same imports
    succeed with tensorflow/reverb/launchpad/courier made unimportable, i.e. on a
    host that lacks them.
    """
    out = {}
    for block in (False, True):
        code = _IMPORT_CHECK.format(forbidden=FORBIDDEN, block=block)
        proc = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=False,
            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
        )
        ok = proc.returncode == 0
        key = "works_without" if block else "loaded"
        out[key] = (
            ok
            if block
            else (
                json.loads(proc.stdout.strip().splitlines()[-1])
                if ok
                else f"import failed: {proc.stderr[-300:]}"
            )
        )
    return out


def _agent_fields_only(overrides) -> None:
    """The update alone is timed: an override outside the agent section changes nothing."""
    for name in ("config", *ALGOS):
        values = overrides.common if name == "config" else overrides.own.get(name, {})
        for path in values:
            if not path.startswith("agent."):
                raise config_lib.ConfigError(
                    f"--{name}.{path}: this benchmark times the agent's update alone; "
                    f"only --config.agent.<field> (or --dqn.agent., --ppo.agent.) applies"
                )


def _flags():
    values = flags.FlagValues()
    flags.DEFINE_list("dqn-batches", ["256", "4096"], "DQN batch sizes N.", flag_values=values)
    flags.DEFINE_list(
        "ppo-chunks",
        ["2", "16"],
        "M: PPO batch [T, M*B] of M chunks of [T=16, B=64]",
        flag_values=values,
    )
    for name in ("dqn-batches", "ppo-chunks"):
        cli.require_integers(name, values)
    flags.DEFINE_float("seconds", 1.5, "Timing per row.", flag_values=values)
    flags.DEFINE_string("json", "", "Also write the rows here.", flag_values=values)
    return values


def main(argv=None) -> list:
    args = _flags()
    argv = [sys.argv[0], *(sys.argv[1:] if argv is None else argv)]
    given = cli.parse_several(
        args, argv, lambda _: configs_of(ALGOS), check=_agent_fields_only, usage=__doc__
    )
    agent_configs = {
        algo: experiment_lib.Experiment(load_config(algo, given.of(algo))).agent_config
        for algo in ALGOS
    }
    start = time.perf_counter()
    rows = sweep(
        [int(n) for n in args["dqn-batches"].value],
        [int(m) for m in args["ppo-chunks"].value],
        args.seconds,
        agent_configs=agent_configs,
    )
    print(f"{'device':<10} {'algo':<5} {'batch':<14} {'updates/s':>12} {'samples/s':>14}")
    for r in rows:
        print(
            f"{r['device']:<10} {r['algo']:<5} {r['batch']:<14} "
            f"{r['updates_per_s']:>12,.1f} {r['samples_per_s']:>14,.0f}"
        )
    check = import_check()
    print(
        f"core imports: loaded {check['loaded']}; "
        f"import with tensorflow/reverb/launchpad blocked: "
        f"{'ok' if check['works_without'] else 'FAILS'}  ({time.perf_counter() - start:.0f} s)"
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "import_check": check}, f, indent=2)
    return rows


if __name__ == "__main__":
    main()
