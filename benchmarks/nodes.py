"""Launchpad nodes the stage benchmarks add around distrl's real nodes.

- `FixedParams`: serves the initial params as `get_params() -> (0, params)`, the one
  method an Actor needs from a learner, so an actor can run with no learner.
- `StageActor` / `StageLearner`: the real `distrl.nodes.actor.Actor` and
  `distrl.nodes.learner.Learner`, unchanged, except that each starts when a file appears
  and stops when another one does (Launchpad cannot start or stop one node of a
  running program). That lets one program time each actor alone, then each
  learner alone on the table its actor filled, one after another.
"""

import inspect
import os

import jax
import launchpad as lp

from distrl import experiment as experiment_lib
from distrl.nodes.actor import Actor
from distrl.nodes.learner import Learner

GO, STOP, PID = ".go", ".stop", ".pid"
_POLL_S = 0.2


def node_kwargs(cls, **known) -> dict:
    """Constructor kwargs for `cls` from `known` values, matched by parameter name.

    distrl's node classes grow optional parameters (resume, logging); matching by
    name keeps these benchmarks working across such changes, and a new required
    parameter fails here with its name instead of deep inside a node process.
    """
    kwargs = {}
    for name, param in list(inspect.signature(cls.__init__).parameters.items())[1:]:
        if name in known:
            kwargs[name] = known[name]
        elif param.default is inspect.Parameter.empty and param.kind not in (
            param.VAR_POSITIONAL,
            param.VAR_KEYWORD,
        ):
            raise TypeError(
                f"{cls.__name__}.__init__ needs {name!r}, which the benchmark "
                f"does not know how to provide; known: {sorted(known)}"
            )
    return kwargs


class FixedParams:
    """Courier node: the agent's initial params, version 0, forever."""

    def __init__(self, config):
        self._config = config
        self._params = None

    def get_params(self):
        """(0, params as a numpy pytree), like `Learner.get_params`."""
        if self._params is None:
            c = self._config
            agent = experiment_lib.Experiment(c).agent
            self._params = jax.device_get(agent.init(jax.random.PRNGKey(c.seed)).params)
        return 0, self._params


class _Gate:
    """Files that start and stop one node body: `<gate>.go` and `<gate>.stop`."""

    def __init__(self, gate_dir: str, gate: str):
        self.go = os.path.join(gate_dir, gate + GO)
        self.stop = os.path.join(gate_dir, gate + STOP)
        self.pid = os.path.join(gate_dir, gate + PID)  # for profilers (benchmarks/profile.py)

    def run(self, node) -> None:
        """Waits for the go file, runs the node's body until the stop file (or the
        program's stop), then idles until the program ends."""
        while not os.path.exists(self.go):
            if lp.wait_for_stop(_POLL_S):
                return
        # The nodes keep the stop flag they built (their lifecycle's `stop_flag`) and hand it to
        # their writer, dataset and params client when the body starts: the gate's stop
        # file joins that flag, before the body runs.
        program_stop = node._should_stop
        node._should_stop = lambda: program_stop() or os.path.exists(self.stop)
        with open(self.pid, "w") as f:
            f.write(str(os.getpid()))
        node.body()
        lp.wait_for_stop()


def _gated(cls):
    """`cls` (a node class whose body is `run()`), started and stopped by the files of
    a gate; importable by name from this module, so Launchpad pickles it by reference."""

    class Gated(cls):
        def __init__(self, *args, gate_dir: str, gate: str, **kwargs):
            super().__init__(*args, **kwargs)
            self._gate = _Gate(gate_dir, gate)

        def run(self) -> None:
            self._gate.run(self)

        def body(self) -> None:
            super().run()

    Gated.__name__ = Gated.__qualname__ = f"Stage{cls.__name__}"
    return Gated


StageActor = _gated(Actor)  # the real Actor behind a gate
StageLearner = _gated(Learner)  # the real Learner behind a gate
