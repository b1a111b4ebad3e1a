"""How many actors a learner needs: a capacity model from measured per-core rates.

Pure arithmetic (no JAX, Reverb or Launchpad). Its inputs, per preset (`Rates`): the env
steps per CPU-second of one actor process, the transitions per CPU-second of the Reverb
server inserting and sampling, the transitions the learner learns from per env step
(`replay.samples_per_insert` for a replay table, 1 on-policy) and whether the actors wait
for each params version (`actor.chunks_per_version` > 0); per learner (`Learner`): the
samples per CPU-second of its process's host work and the most cores it uses, and for an
accelerator its update's samples/s on the device. The `capacity` section of
benchmarks/run.py measures them (`benchmarks/capacity_bench.py`).

Allocation of a host of N cores (cores are shared as CPU time, fractions included):
- the counter, which also hears every actor's reports, takes `service_per_actor` cores per
  actor (measured with the params served to the actor); the evaluator is left out (it
  evaluates a few times a minute);
- the learner process: a CPU learner runs its update and its reading on the host, on at
  most the cores it used alone (`Learner.host_cores`); an accelerator learner's process
  reads and batches on the host, on at most `LEARNER_HOST_CORES`, and updates on the device;
- the Reverb server uses at most `SERVER_CORES` (an assumption: one table's inserts and
  samples take its lock, and this 2-core machine cannot measure beyond 2);
- the actors get every core left, each at most one (one XLA thread, `nodeenv`).

Env steps/s with `a` actors:
- asynchronous (a replay table, or on-policy without the version gate): the least of what
  the actors make (a x the per-core rate, or every core the other stages leave: 'actors'),
  what the Reverb server takes on its cores ('Reverb insert' or 'Reverb sample', whichever
  costs it more) and what the learner learns from ('learner');
- gated on-policy: the actors act, then wait while the learner learns from what they
  acted, so the two phases take turns: 1 / (1/A + 1/B), A the act phase's rate (the
  actors', the server's inserts; out of cores: 'actors') and B the learn phase's (the
  learner's, the server's samples; out of cores: 'learner'), and each round (one
  learner batch of env steps, `round_steps`) waits `round_trip_s` more for the new params
  to reach the actors: R / (R/A + R/B + trip).
A host saturates at the fewest actors within `WITHIN` of the most env steps/s any count
up to its cores reaches; the stage that limits that most is the one that saturates first.
"""

import dataclasses
import math
import sys

SERVER_CORES = 4.0
LEARNER_HOST_CORES = 1.0
WITHIN = 0.05
HOSTS = (2, 16, 64, 208)  # the cores of the hosts the tables show


@dataclasses.dataclass(frozen=True)
class Rates:
    """One preset's measured rates (see the module docstring)."""

    actor_per_core: float  # env steps per CPU-second of an actor process
    insert_per_core: float  # transitions per CPU-second of the Reverb server, inserting
    sample_per_core: float  # transitions per CPU-second of the Reverb server, sampling
    samples_per_step: float  # transitions learned from per env step
    gated: bool = False  # on-policy with the version gate (fresh data)
    service_per_actor: float = 0.0  # the counter's cores per actor
    round_steps: int = 0  # gated: env steps of one round, a learner batch (0: no round)
    round_trip_s: float = 0.0  # gated: seconds a round waits for the new params


@dataclasses.dataclass(frozen=True)
class Learner:
    """A learner: `host_per_core` samples per CPU-second of its process's host work, on at
    most `host_cores`; `device_samples_per_s` its update's on an accelerator (None: the
    update runs on the host, within `host_per_core`)."""

    name: str
    host_per_core: float
    host_cores: float
    device_samples_per_s: float | None = None

    @property
    def samples_per_s(self) -> float:
        """The most transitions per second it learns from."""
        host = self.host_per_core * self.host_cores
        return host if self.device_samples_per_s is None else min(host, self.device_samples_per_s)

    @property
    def limit(self) -> str:
        """What bounds `samples_per_s`: 'device', 'host work' or 'CPU'."""
        if self.device_samples_per_s is None:
            return "CPU"
        host = self.host_per_core * self.host_cores
        return "device" if self.device_samples_per_s <= host else "host work"


@dataclasses.dataclass(frozen=True)
class Prediction:
    """Env steps/s with `actors` actors, the stage that bounds it, the learner's busy share."""

    actors: int
    env_steps_per_s: float
    bottleneck: str
    learner_busy: float


def _least(bounds: dict) -> tuple:
    """(stage, env steps/s) of the lowest bound; the first listed wins a tie."""
    stage = min(bounds, key=bounds.get)
    return stage, bounds[stage]


def _reverb_name(rates: Rates) -> str:
    insert, sample = 1 / rates.insert_per_core, rates.samples_per_step / rates.sample_per_core
    return "Reverb insert" if insert >= sample else "Reverb sample"


def predict(rates: Rates, learner: Learner, cores: float, actors: int) -> Prediction:
    """Env steps/s of `actors` actors on a host of `cores` with `learner`."""
    s = rates.samples_per_step
    free = cores - actors * rates.service_per_actor  # after the counter
    actor_cost, insert_cost = 1 / rates.actor_per_core, 1 / rates.insert_per_core
    sample_cost, learner_cost = s / rates.sample_per_core, s / learner.host_per_core
    learns = learner.samples_per_s / s
    if not rates.gated:
        reverb = SERVER_CORES / (insert_cost + sample_cost)
        bounds = {
            "actors": min(
                actors * rates.actor_per_core,
                free / (actor_cost + insert_cost + sample_cost + learner_cost),
            ),
            _reverb_name(rates): reverb,
            "learner": learns,
        }
        stage, rate = _least(bounds)
        return Prediction(actors, max(rate, 0.0), stage, max(rate, 0.0) / learns)
    acting = {
        "actors": min(actors * rates.actor_per_core, free / (actor_cost + insert_cost)),
        "Reverb insert": SERVER_CORES / insert_cost,
    }
    learning = {
        "learner": min(learns, free / (learner_cost + sample_cost)),
        "Reverb sample": SERVER_CORES / sample_cost,
    }
    (act_stage, act), (learn_stage, learn) = _least(acting), _least(learning)
    if act <= 0 or learn <= 0:
        return Prediction(actors, 0.0, act_stage if act <= 0 else learn_stage, 0.0)
    steps = rates.round_steps or 1.0
    rate = steps / (steps / act + steps / learn + rates.round_trip_s)
    return Prediction(actors, rate, learn_stage if learn <= act else act_stage, rate / learns)


@dataclasses.dataclass(frozen=True)
class Saturation:
    """A host's answer: the fewest actors within `WITHIN` of its most env steps/s, that
    prediction, and the most (with the stage that bounds it)."""

    cores: float
    learner: str
    at: Prediction
    best: Prediction


def saturation(rates: Rates, learner: Learner, cores: float) -> Saturation:
    """Every actor count from 1 to the host's cores (an actor uses at most one)."""
    counts = range(1, max(1, math.floor(cores)) + 1)
    predictions = [predict(rates, learner, cores, a) for a in counts]
    best = max(predictions, key=lambda p: p.env_steps_per_s)
    at = next(p for p in predictions if p.env_steps_per_s >= (1 - WITHIN) * best.env_steps_per_s)
    return Saturation(cores, learner.name, at, best)


def fmt(value: float) -> str:
    """1234567 -> '1.23M', 45600 -> '45.6k', 12.3 -> '12.3'; '—' for inf (no bound)."""
    if not math.isfinite(value):
        return "—"
    for unit, scale in (("M", 1e6), ("k", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.3g}{unit}"
    return f"{value:.3g}"


def stage_text(learner: Learner, stage: str) -> str:
    """The stage, and for a learner what bounds it ('learner (device)')."""
    return f"{stage} ({learner.limit})" if stage == "learner" else stage


def table(preset: str, rates: Rates, learners, hosts=HOSTS) -> str:
    """A markdown table for one preset: per host and learner, the actors that saturate,
    the stage that saturates first, the env steps/s expected and the learner's busy share."""
    lines = [
        f"{preset} ({rates.samples_per_step:g} samples per env step"
        f"{', gated' if rates.gated else ''})",
        "",
        "| cores | learner | actors | saturates first | env steps/s | learner busy |",
        "|---|---|---|---|---|---|",
    ]
    for cores in hosts:
        for learner in learners:
            s = saturation(rates, learner, cores)
            lines.append(
                f"| {cores} | {learner.name} | {s.at.actors} | "
                f"{stage_text(learner, s.best.bottleneck)} | {fmt(s.at.env_steps_per_s)} | "
                f"{s.at.learner_busy:.0%} |"
            )
    return "\n".join(lines)


if __name__ == "__main__":  # the section on its own: `run.py --only=capacity [flags]`
    from benchmarks import run  # noqa: PLC0415 - measuring needs the full stack

    sys.exit(run.main(["--only=capacity", *sys.argv[1:]]))
