"""The host-stepped actor's compute against the env itself (issue 27 item 6), in one process.

For gymnasium's CartPole-v1 with B copies in a synchronous vector env (the actor's
`host_rollout.VectorStepper`, checked copies, SAME_STEP autoreset), it measures:
  - random: the vector env stepped with random actions, no policy (the ceiling);
  - <algo>: `host_rollout.HostAct` as an actor runs it, each step one jitted batched
    policy call, each chunk of T steps the pipeline's item function and one packed
    copy off the device (no Reverb: the write is measured by the other rows);
alternating windows, so both see the same machine load. `python
benchmarks/host_env.py` prints the figures; `make bench` puts them in its table.
"""

import os
import sys
import time

if __package__ in (None, ""):  # `python benchmarks/host_env.py`
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax
import numpy as np

ENV = "gymnasium:CartPole-v1"


def _random_rate(stepper, seconds: float) -> float:
    rng = np.random.default_rng(0)
    n = stepper.env.spec.num_actions
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        stepper.step(rng.integers(0, n, stepper.num_envs))
        steps += stepper.num_envs
    return steps / (time.perf_counter() - start)


def _actor(algo: str, num_envs: int, timeout_s: float):
    from benchmarks.common import load_config  # noqa: PLC0415
    from distrl import agents, host_rollout, pipelines  # noqa: PLC0415
    from distrl import config as config_lib  # noqa: PLC0415

    c = load_config(algo, {"env.name": ENV, "actor.num_envs": num_envs})
    c.env.step_timeout_s = timeout_s
    env = config_lib.make_env(c)
    agent = agents.make_agent(config_lib.make_agent_config(c), env.spec)
    to_items = pipelines.of(agent.config).item_fn(agent.config, c, env)
    act = host_rollout.make_act(env, agent.policy, c, to_items)
    params = agent.init(jax.random.PRNGKey(0)).params
    return act, params, c.actor.unroll_length


def _actor_rate(act, params, unroll: int, num_envs: int, seconds: float, state) -> float:
    carry, tail, key = state["carry"], state["tail"], state["key"]
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        key, step_key = jax.random.split(key)
        (carry, tail), packed = act(params, carry, step_key, 0.1, tail)
        act.unpack(packed)
        steps += unroll * num_envs
    state.update(carry=carry, tail=tail, key=key)
    return steps / (time.perf_counter() - start)


def measure(algos=("dqn", "ppo"), num_envs: int = 16, window: float = 3.0, rounds: int = 2):
    """{'random': {...}, algo: {...}}: env steps/s (best window of `rounds`), B, T."""
    from distrl import host_rollout  # noqa: PLC0415
    from distrl.envs import factory  # noqa: PLC0415

    env = factory.build(ENV, {})
    out = {"random": {"env": ENV, "num_envs": num_envs, "steps_per_s": 0.0}}
    for timeout_s, name in ((60.0, "actor"), (0.0, "actor_no_deadline")):
        for algo in algos:
            act, params, unroll = _actor(algo, num_envs, timeout_s)
            state = dict(carry=act.init_carry(0), tail=None, key=jax.random.PRNGKey(1))
            _actor_rate(act, params, unroll, num_envs, 1.0, state)  # compile
            stepper = host_rollout.VectorStepper(env, num_envs)
            stepper.reset(0)
            for _ in range(rounds):
                rate = _random_rate(stepper, window)
                out["random"]["steps_per_s"] = max(out["random"]["steps_per_s"], rate)
                rate = _actor_rate(act, params, unroll, num_envs, window, state)
                entry = out.setdefault(algo, {"num_envs": num_envs, "unroll_length": unroll})
                entry[f"{name}_steps_per_s"] = max(entry.get(f"{name}_steps_per_s", 0.0), rate)
            stepper.close()
            act.close()
    return out


if __name__ == "__main__":
    import json

    print(json.dumps(measure(), indent=1))
