"""distrl's real nodes stepped with Launchpad unimportable, for tests/test_imports.py.

    python tests/nodes_without_launchpad.py RUN_DIR

One Reverb server in this process; the counter and the learner served by courier
(as a program serves them), the actor reaching them through courier clients; the
three share one `distrl.nodes.lifecycle.InProcess`. The learner's first update
waits in a thread for the replay's min size while the actor steps. Prints what
each step returned and what the counter and the table hold, as one JSON line.
"""

import sys

sys.modules["launchpad"] = None  # any import of Launchpad fails from here on

import json  # noqa: E402
import threading  # noqa: E402

import courier  # noqa: E402
import reverb  # noqa: E402
from conftest import load_config  # noqa: E402

from distrl import exits, replay  # noqa: E402
from distrl import experiment as experiment_lib  # noqa: E402
from distrl.nodes.actor import Actor  # noqa: E402
from distrl.nodes.counter import Counter  # noqa: E402
from distrl.nodes.learner import Learner  # noqa: E402
from distrl.nodes.lifecycle import InProcess  # noqa: E402

_UPDATE_TIMEOUT_S = 240.0  # a first update compiles, and the machine may be loaded


def serve(node) -> courier.Server:
    """A courier server for each public method of `node`, as Launchpad's CourierNode binds them."""
    server = courier.Server()
    for name in dir(node):
        if not name.startswith("_") and callable(getattr(node, name)):
            server.Bind(name, getattr(node, name))
    server.Start()
    return server


def main(run_dir: str) -> None:
    config = load_config("dqn")
    config.replay.samples_per_insert = 1.0  # the second rollout must not wait for more updates
    tables = experiment_lib.Experiment(config).pipeline.make_tables(
        config, experiment_lib.Experiment(config).env
    )
    replay_server = reverb.Server(tables)
    address = f"localhost:{replay_server.port}"
    lifecycle = InProcess()
    counter = serve(Counter())
    learner = Learner(
        experiment_lib.Experiment(config),
        reverb.Client(address),
        courier.Client(counter.address),
        run_dir,
        0.0,
        lifecycle=lifecycle,
    )
    learner_server = serve(learner)
    actor = Actor(
        experiment_lib.Experiment(config),
        0,
        reverb.Client(address),
        courier.Client(learner_server.address),
        courier.Client(counter.address),
        run_dir,
        lifecycle=lifecycle,
    )
    # The learner's first step publishes version 0, then waits for min_size transitions,
    # which the actor's first rollout writes (14 n-step rows x 64 envs > 640).
    updates = []
    update = threading.Thread(target=lambda: updates.append(learner.step()), daemon=True)
    update.start()
    actor_steps = [actor.step()]
    update.join(timeout=_UPDATE_TIMEOUT_S)
    actor_steps.append(actor.step())  # acting goes on with the learner's params
    counts = courier.Client(counter.address).get_counts()
    lifecycle.request_stop()
    print(
        json.dumps(
            {
                "actor_steps": actor_steps,
                "learner_steps": updates,
                "counts": counts,
                "table_size": int(reverb.Client(address).server_info()[replay.TABLE].current_size),
            }
        ),
        flush=True,
    )
    exits.now(0)  # the servers' and the clients' teardown adds nothing here


if __name__ == "__main__":
    main(sys.argv[1])
