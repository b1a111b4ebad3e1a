"""What-if measurements behind the proposed changes (see the README, "Tools").

Each experiment times distrl's current way of doing one step of the pipeline
beside a proposed one, in the same process, back to back, against a Reverb server
in a child process where Reverb is involved:

- `learner-feed`: the learner's loop (dataset `next`, `to_learner_batch`, update)
  with `jax.device_put` of each batch (as `Learner._train` does), with the numpy
  batch passed to the jitted update directly, and with batches fetched by a
  background thread.
- `actor-pipeline`: the actor's loop (rollout, items, `device_get`, `Writer`) one
  part after the other (as `Actor._act` does) and software-pipelined: the next
  rollout is dispatched before the previous chunk is written.
- `async-dispatch`: how far the learner's version can run ahead of finished PPO
  updates: dispatch N updates, then time `jax.device_get(params)` (what
  `Learner.get_params` does).

    python -m benchmarks.whatif [learner-feed] [actor-pipeline] [async-dispatch]
"""

import queue
import sys
import threading
import time

import jax
import numpy as np
import reverb

from benchmarks import ceilings, tables
from benchmarks import learner as learner_bench
from benchmarks.common import load_config, measure_rate
from distrl import agents, replay
from distrl import config as config_lib


def _fetch_thread(iterator, size: int = 4):
    """`get()` of a queue that a daemon thread fills from `iterator` (sample.data)."""
    q = queue.Queue(maxsize=size)

    def work():
        for sample in iterator:
            q.put(sample.data)

    threading.Thread(target=work, daemon=True).start()
    return q.get


def learner_feed(seconds: float = 3.0) -> dict:
    """DQN learner loop updates/s: as distrl, numpy direct, numpy + fetch thread."""
    c = load_config("dqn")
    agent = agents.make_agent(config_lib.make_agent_config(c), config_lib.make_env(c))
    work = ceilings.ActorWork(c)
    chunks = [work.items() for _ in range(4)]
    variants = {
        "device_put (as Learner._train)": (jax.device_put, False),
        "numpy batch into the jitted update": (lambda b: b, False),
        "numpy + batches fetched by a thread": (lambda b: b, True),
    }
    out = {}
    with tables.server_process({"dqn": (c, 16)}) as addresses:
        writer = replay.Writer(reverb.Client(addresses["dqn"]), lambda: False)
        for i in range(100):
            writer.write_steps(chunks[i % len(chunks)])
        writer.close()
        for name, (feed, threaded) in variants.items():
            iterator = replay.make_dataset(addresses["dqn"], c, 16).as_numpy_iterator()
            fetch = _fetch_thread(iterator) if threaded else (lambda it=iterator: next(it).data)
            state = {"s": agent.init(jax.random.PRNGKey(0))}

            def step(fetch=fetch, feed=feed, state=state):
                batch = feed(replay.to_learner_batch(fetch(), True))
                state["s"], metrics = agent.update(state["s"], batch)
                return metrics

            out[name] = measure_rate(step, seconds, sync=jax.block_until_ready)
    return out


def _serial_step(work, write):
    return lambda: write(work.items())


def _pipelined_step(work, write):
    pending = {"items": None}

    def step():
        chunk, _ = work.chunk()  # dispatched; XLA computes while Python writes below
        items, work.tail = work.to_items(work.tail, chunk)
        if pending["items"] is not None:
            write(jax.device_get(pending["items"]))
        pending["items"] = items

    return step


def actor_pipeline(seconds: float = 3.0, batch_sizes=(64, 256)) -> dict:
    """Actor loop env steps/s, serial vs pipelined, per algorithm and B."""
    out = {}
    for algo in ("dqn", "ppo"):
        for b in batch_sizes:
            c = load_config(algo, {"actor.num_envs": b})
            work = ceilings.ActorWork(c)
            with tables.server_process({algo: (c, 16)}) as addresses:
                writer = replay.Writer(reverb.Client(addresses[algo]), lambda: False)
                write = writer.write_steps if algo == "dqn" else writer.write_chunk
                for name, make in (("serial", _serial_step), ("pipelined", _pipelined_step)):
                    calls = measure_rate(make(work, write), seconds)
                    out[f"{algo} B={b} {name}"] = calls * c.actor.unroll_length * b
    return out


def async_dispatch(updates: int = 30) -> dict:
    """Seconds to dispatch `updates` PPO updates, then to device_get the params."""
    agent = agents.make_agent(agents.make_config("ppo"), agents.EnvSpec(16, 4))
    batch = jax.device_put(learner_bench.random_ppo_batch(np.random.default_rng(0), 16, 16, 128))
    state = agent.init(jax.random.PRNGKey(0))
    state, metrics = agent.update(state, batch)
    jax.block_until_ready(metrics)
    start = time.perf_counter()
    for _ in range(updates):
        state, _ = agent.update(state, batch)
    dispatched = time.perf_counter()
    jax.device_get(state.params)
    return {
        f"dispatch {updates} updates (s)": dispatched - start,
        "then device_get(params) (s)": time.perf_counter() - dispatched,
    }


EXPERIMENTS = {
    "learner-feed": learner_feed,
    "actor-pipeline": actor_pipeline,
    "async-dispatch": async_dispatch,
}


def main(argv=None) -> None:
    names = (argv if argv is not None else sys.argv[1:]) or list(EXPERIMENTS)
    for name in names:
        for variant, value in EXPERIMENTS[name]().items():
            print(f"{name:15s} {variant:40s} {value:14,.3f}", flush=True)


if __name__ == "__main__":
    main()
