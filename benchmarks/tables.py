"""Reverb for the benchmarks: an unlimited table and a server in another process.

The benchmark table has the signature of the config's pipeline
(its `signature`), so the real `replay.Writer` and `replay.make_dataset`
work on it unchanged, but no rate limiter and a uniform sampler that does not
consume items: writers never block on it and a pre-filled table can be read forever
(which the learner-only stage and the dataset ceiling need, for PPO too).
"""

import contextlib
import multiprocessing
import os
import queue

import reverb

from distrl import experiment as experiment_lib
from distrl import replay

SERVER_START_TIMEOUT_S = 60


def unlimited_tables(config, max_items: int = 0):
    """[one reverb.Table named replay.TABLE]: uniform, FIFO removal, no limiter."""
    size = max_items or max_items_for(config)
    pipeline = experiment_lib.Experiment(config).pipeline
    return [
        reverb.Table(
            replay.TABLE,
            sampler=reverb.selectors.Uniform(),
            remover=reverb.selectors.Fifo(),
            max_size=size,
            rate_limiter=reverb.rate_limiters.MinSize(1),
            signature=pipeline.signature(config, experiment_lib.Experiment(config).env),
        )
    ]


def max_items_for(config) -> int:
    """Table capacity: `replay.max_size` transitions in items of the config's pipeline
    (DQN: the replay's size; on-policy: 62 chunks of [16, 64] at the defaults)."""
    return max(
        1,
        config.replay.max_size
        // experiment_lib.Experiment(config).pipeline.transitions_per_item(config),
    )


def table_counts(client: reverb.Client) -> dict:
    """{'inserts', 'samples', 'size'}: items inserted and sampled so far, items held."""
    info = client.server_info(timeout=2)[replay.TABLE]
    limiter = info.rate_limiter_info
    return {
        "inserts": limiter.insert_stats.completed,
        "samples": limiter.sample_stats.completed,
        "size": info.current_size,
    }


def _serve(configs, ports, stop) -> None:
    """Child process body: one server per (name, config) until `stop` is set."""
    servers = {
        name: reverb.Server(tables=unlimited_tables(config)) for name, config in configs.items()
    }
    ports.put({name: server.port for name, server in servers.items()})
    stop.wait()
    for server in servers.values():
        server.stop()


def _wait_for_ports(proc, ports) -> dict:
    """The child's {name: port}; raises at once if the child died instead."""
    for _ in range(SERVER_START_TIMEOUT_S * 10):
        try:
            return ports.get(timeout=0.1)
        except queue.Empty:
            if not proc.is_alive():
                raise RuntimeError(f"the Reverb server process exited ({proc.exitcode})") from None
    raise RuntimeError(f"no Reverb server after {SERVER_START_TIMEOUT_S} s")


@contextlib.contextmanager
def server_process(configs):
    """Yields {name: 'localhost:<port>'}: a Reverb server per entry of `configs`
    ({name: config}), all in one child process.

    A separate process, so that the servers' threads do not share the GIL and the
    Python process with the client being measured, as in the real program; one
    process for all of them, so that TensorFlow is imported once.
    """
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    ctx = multiprocessing.get_context("spawn")
    ports, stop = ctx.Queue(), ctx.Event()
    proc = ctx.Process(target=_serve, args=(configs, ports, stop), daemon=True)
    proc.start()
    try:
        found = _wait_for_ports(proc, ports)
        yield {name: f"localhost:{port}" for name, port in found.items()}
    finally:
        stop.set()
        proc.join(timeout=10)
        if proc.is_alive():
            proc.kill()
            proc.join()
