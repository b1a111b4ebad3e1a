"""The `capacity` section of benchmarks/run.py: measures the capacity model's inputs
(`benchmarks/capacity.py`) on this machine, prints its predictions for hosts of 2 to 208
cores, and checks them against the real program here (`python -m benchmarks.capacity`).

Inputs, per preset of `rows.CAPACITY`, from one stage program (`stages.py`: each real
Actor alone, then its real Learner alone on the table it filled; `Monitor`'s cores per
node process over each window):
- actors: env steps/s over the actor process's cores; the counter's cores (it served
  the actor's params and heard its reports) as the service per actor;
- Reverb: transitions/s into the table over the replay process's cores in the actor's
  window (insert), samples/s over its cores in the learner's (sample);
- the CPU learner: samples/s (the most it learns here) over its process's cores;
and in this process, the Reverb read ceiling per CPU-second (`ceilings.reverb_ceilings`:
the learner's dataset and batch on a filled table, its server in a child process): the
host work an accelerator learner keeps (a host-stepped preset's items read with its JAX
twin in its place, `JAX_TWINS`: the same shapes).
Accelerators: the rows of results/learner_devices.csv (`accelerator.py --rows --csv`)
that are not the CPU's, the latest per device kind and preset at 1 update per call.

The check: each entry of `rows.CAPACITY_CHECKS` runs end to end (`stages.py --mode=e2e`:
`make_program` unchanged, the preset's own samples per insert) with each count of
`rows.CAPACITY_ACTORS` actors, in this run, beside the model's prediction for this host
(its cores, the CPU learner); the table's rows hold it to 25%. `run.py --record=STUDY`
appends them to results/capacity.csv.
"""

import copy
import csv
import datetime
import math
import os
import statistics
import time

from benchmarks import capacity, report, rows
from benchmarks.capacity import Learner, Rates
from benchmarks.common import ROOT, append_csv, load_config

DEVICES_CSV = ROOT / "benchmarks" / "results" / "learner_devices.csv"
CHECKS_CSV = ROOT / "benchmarks" / "results" / "capacity.csv"
CHECK_COLUMNS = (
    "study", "date", "commit", "commit_source", "command", "load", "platform", "device",
    "check", "preset", "actors", "cores", "learner", "predicted", "measured", "ratio",
    "holds", "bottleneck", "note",
)  # fmt: skip
_FLOOR = 0.01  # cores: `monitor.cores_between` leaves out a node under it
# A JAX env whose items have a host-stepped env's shapes: `ceilings.ActorWork` fills the
# read ceiling's table by a jitted rollout.
JAX_TWINS = {"gymnasium:CartPole-v1": "gymnax:CartPole-v1"}


def data_shape(config) -> tuple:
    """(samples learned per env step, gated): a replay table's samples per insert, or
    1 for an on-policy queue, gated where its actors wait for each params version."""
    from distrl import experiment as experiment_lib  # noqa: PLC0415

    if not experiment_lib.Experiment(config).pipeline.reading(config).consumed:  # a replay table
        return float(config.replay.samples_per_insert), False
    return 1.0, config.actor.chunks_per_version > 0


def gate_overrides(config, actors: int) -> dict:
    """A gated config's chunks per version raised so `actors` act a whole batch per
    version (validation's rule): 1 actor of configs/ppo.py acts 2, as 2 actors act 1 each."""
    per_version, batch = config.actor.chunks_per_version, config.learner.get("batch_chunks", 1)
    if per_version and actors * per_version < batch:
        return {"actor.chunks_per_version": math.ceil(batch / actors)}
    return {}


def round_steps(config, actors: int) -> int | None:
    """Env steps of one version's round of gated actors (None: not gated)."""
    a = config.actor
    per_round = actors * a.chunks_per_version * a.unroll_length * a.num_envs
    return per_round if data_shape(config)[1] else None


def measure(bench) -> dict:
    """The inputs (one stage program, the read ceilings) and the checks' programs."""
    out = bench.results.setdefault("capacity", {"inputs": {}, "checks": {}})
    stage = bench._program("stage", list(rows.CAPACITY), 1, actors_only=())
    out["stage_error"] = stage.get("error")
    configs = {name: load_config(name, bench.overrides(name)) for name in rows.CAPACITY}
    for name, config in configs.items():
        spi, gated = data_shape(config)
        out["inputs"][name] = {
            "actor": stage.get(f"{name}-actor"),
            "learner": stage.get(f"{name}-learner"),
            "samples_per_step": spi,
            "gated": gated,
        }
        if gated:  # a round is one learner batch; the new params' way to its actors
            a = config.actor
            batch = config.learner.batch_chunks * a.unroll_length * a.num_envs
            out["inputs"][name].update(round_steps=batch, round_trip_s=params_round_trip(config))
    for name, reverb in read_ceilings(configs, bench.s["ceiling_s"]).items():
        out["inputs"][name]["reverb"] = reverb
    bench.save()
    for check, (preset, overrides) in rows.CAPACITY_CHECKS.items():
        config = load_config(preset, {**bench.overrides(preset), **overrides})
        for n in rows.CAPACITY_ACTORS:
            extra = {**overrides, **gate_overrides(config, n)}
            tag = f"capacity-{check}-{n}"
            measured = bench._program("e2e", [preset], n, extra, tag=tag, spi=0)
            ran = load_config(preset, {**bench.overrides(preset), **extra})
            out["checks"][f"{check}-{n}"] = {
                "preset": preset,
                "actors": n,
                "overrides": extra,
                "shape": data_shape(ran),
                "round_steps": round_steps(ran, n),
                "e2e": measured.get("e2e"),
                "error": measured.get("error"),
            }
            bench.save()
    predict_checks(out, os.cpu_count())
    return out


def params_round_trip(config, calls: int = 30) -> float:
    """Seconds from a new params version on the learner to an actor acting with it, as
    the gated actor gets it: the learner's `get_params` (a copy to the host) over courier
    to a client that puts them on its device; the median of `calls` in this process."""
    import courier  # noqa: PLC0415 - the data path's, only where measured
    import jax  # noqa: PLC0415
    from launchpad.nodes.courier import courier_utils  # noqa: PLC0415

    from distrl import experiment as experiment_lib  # noqa: PLC0415
    from distrl.program import ports  # noqa: PLC0415

    params = experiment_lib.Experiment(config).agent.init(jax.random.PRNGKey(0)).params

    class Served:
        def get_params(self):
            return 0, jax.device_get(params)

    claims = ports.Claims()
    port = claims.port()
    server = courier_utils.make_courier_server(Served(), port=port)
    server.Start()
    try:
        client = courier.Client(f"localhost:{port}")
        times = []
        for _ in range(calls):
            start = time.perf_counter()
            jax.block_until_ready(jax.device_put(client.get_params()[1]))
            times.append(time.perf_counter() - start)
        return statistics.median(times)
    finally:
        server.Stop()
        claims.release()


def read_ceilings(configs: dict, seconds: float) -> dict:
    """{name: `ceilings.reverb_ceilings`} of each config a JAX env's actor can fill (a
    host env's twin in its place); one server process serves them all."""
    from benchmarks import ceilings, tables  # noqa: PLC0415

    twins = {}
    for name, config in configs.items():
        env = config.env.name
        if env.startswith("gymnasium:") and env not in JAX_TWINS:
            continue
        twins[name] = copy.deepcopy(config)
        twins[name].env.name = JAX_TWINS.get(env, env)
    with tables.server_process(twins) as addresses:
        return {
            name: ceilings.reverb_ceilings(ceilings.ActorWork(c), addresses[name], seconds)
            for name, c in twins.items()
        }


def _cores(figures: dict, group: str) -> float:
    """The cores of a node group's processes in a window (at least `_FLOOR`)."""
    used = (figures.get("cores") or {}).items()
    return max(sum(c for node, c in used if node.split("/")[0] == group), _FLOOR)


def rates_of(inputs: dict, shape=None) -> Rates | None:
    """The model's `Rates` of a preset's measured inputs (None where a phase failed);
    `shape`: (samples per env step, gated) of a variant of its config."""
    actor, learner = inputs.get("actor") or {}, inputs.get("learner") or {}
    if not actor.get("env_steps_per_s") or not learner.get("samples_per_s"):
        return None
    spi, gated = shape or (inputs["samples_per_step"], inputs["gated"])
    return Rates(
        actor_per_core=actor["env_steps_per_s"] / _cores(actor, "actor"),
        insert_per_core=actor["transitions_to_reverb_per_s"] / _cores(actor, "replay"),
        sample_per_core=learner["samples_per_s"] / _cores(learner, "replay"),
        samples_per_step=spi,
        gated=gated,
        service_per_actor=_cores(actor, "counter"),
        round_steps=inputs.get("round_steps", 0) if gated else 0,
        round_trip_s=inputs.get("round_trip_s", 0.0) if gated else 0.0,
    )


def cpu_learner(inputs: dict) -> Learner:
    """The CPU learner as measured alone: its samples/s over its cores, on those cores."""
    learner = inputs["learner"]
    cores = _cores(learner, "learner")
    return Learner("CPU learner", learner["samples_per_s"] / cores, cores)


def host_work_per_core(inputs: dict) -> float:
    """Samples per CPU-second of an accelerator learner's host work: the read ceiling's
    (inf where it was not measured: no bound)."""
    return (inputs.get("reverb") or {}).get("read_samples_per_cpu_s") or math.inf


def read_devices(path=DEVICES_CSV) -> list:
    """The rows of learner_devices.csv (a row without platform or device reads as '')."""
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return [
            dict(row, platform=row.get("platform", ""), device=row.get("device", ""))
            for row in csv.DictReader(f)
        ]


def device_learners(devices: list, preset: str, inputs: dict) -> list:
    """An accelerator `Learner` per device kind with rows for `preset`: the most samples/s
    of any updates-per-call K, fed from host batches as the learner node is (`fed`) where
    measured, else on device-resident batches; the latest measurement of each; its host
    work at this machine's per-core rate on one core."""
    best = {}
    for row in devices:
        if row["platform"] in ("", "cpu") or row["preset"] != preset:
            continue
        kind = (row["device"], row.get("figure") or "resident")
        rate = float(row["samples_per_s"])
        commit = row.get("commit", "")
        if kind not in best or best[kind][0] != commit or rate > best[kind][1]:
            best[kind] = (commit, rate)  # a later commit's rows replace earlier ones
    latest = {}
    for (device, figure), (_, rate) in best.items():
        if figure == "fed" or device not in latest:
            latest[device] = rate
    host = host_work_per_core(inputs)
    return [
        Learner(kind, host, capacity.LEARNER_HOST_CORES, samples)
        for kind, samples in latest.items()
    ]


def cores_left(e2e: dict, cores: float) -> float:
    """The host's cores less what other work took in the program's window (the machine's
    busy cores less the program's own): what this shared host had for it."""
    machine, ours = e2e.get("machine_cores"), e2e.get("cores_total")
    if machine is None or ours is None:
        return cores
    return min(cores, max(cores - (machine - ours), _FLOOR))


def predict_checks(out: dict, cores: float) -> None:
    """Each check's predictions with the CPU learner, for the cores left to its program
    (the one its row judges) and for all the host's, beside what it measured."""
    for check in out["checks"].values():
        inputs = out["inputs"][check["preset"]]
        rates = rates_of(inputs, tuple(check["shape"]))
        e2e = check.get("e2e") or {}
        if rates is None or not e2e.get("env_steps_per_s"):
            check["error"] = check.get("error") or "an input or the program was not measured"
            continue
        measured, left = e2e["env_steps_per_s"], cores_left(e2e, cores)
        predictions = []
        for on, label in ((left, f"{left:.2f} of {cores:g}"), (cores, f"{cores:g}")):
            p = capacity.predict(rates, cpu_learner(inputs), on, check["actors"])
            trip = _round_trip_ms(check, p.env_steps_per_s, measured)
            predictions.append(
                dict(cores=label, predicted=p.env_steps_per_s, bottleneck=p.bottleneck)
                | dict(round_trip_ms=trip)
            )
        whole = judged(dict(check, **predictions[1], measured=measured))
        check.update(
            predictions[0],
            predictions=predictions,
            measured=measured,
            host=f"{predictions[0]['cores']} cores left to it, CPU learner",
            all_cores=f"{capacity.fmt(whole.figure)} ({whole.ratio:.2f}x)",
            updates_per_s=e2e.get("updates_per_s"),
            cores_total=e2e.get("cores_total"),
            cores_text=e2e.get("cores_text"),
        )


def _round_trip_ms(check: dict, predicted: float, measured: float) -> float | None:
    """A gated check's time per round beyond the model's (which leaves out the params'
    way to the actors and the chunks' through Reverb), in ms; None where not gated."""
    steps = check.get("round_steps")
    return 1e3 * steps * (1 / measured - 1 / predicted) if steps else None


def judged(check: dict) -> report.Row:
    """A measured check as a table row: the prediction against the measured, its goal."""
    return report.Row("", "", check["predicted"], "", check["measured"], goal=rows.CAPACITY_GOAL)


def summary(out: dict, devices=None) -> str:
    """The inputs, the predictions' tables per preset and the checks, as markdown."""
    devices = read_devices() if devices is None else devices
    lines = ["capacity inputs (per CPU-second of each process; the CPU learner alone)", ""]
    lines += ["| preset | actor | Reverb insert | Reverb sample | CPU learner | host work |"]
    lines += ["|---|---|---|---|---|---|"]
    tables = []
    for name, inputs in out["inputs"].items():
        rates = rates_of(inputs)
        if rates is None:
            lines.append(f"| {name} | not measured: {out.get('stage_error') or 'a phase failed'} |")
            continue
        learner, f = cpu_learner(inputs), capacity.fmt
        lines.append(
            f"| {name} | {f(rates.actor_per_core)} | {f(rates.insert_per_core)} | "
            f"{f(rates.sample_per_core)} | {f(learner.samples_per_s)} samples/s on "
            f"{learner.host_cores:.2f} cores | {f(host_work_per_core(inputs))} |"
        )
        learners = [learner, *device_learners(devices, name, inputs)]
        tables.append(capacity.table(name, rates, learners))
    lines += ["", *("\n\n".join(tables).splitlines()), "", "check (this host, CPU learner):"]
    for key, check in out["checks"].items():
        if "predicted" not in check:
            lines.append(f"- {key}: {check.get('error')}")
            continue
        lines.append(
            f"- {key}, measured {capacity.fmt(check['measured'])} env steps/s on "
            f"cores {check['cores_text']}:"
        )
        for prediction in check["predictions"]:
            row, trip = judged(dict(check, **prediction)), prediction["round_trip_ms"]
            lines.append(
                f"  - for {prediction['cores']} cores: {capacity.fmt(row.figure)} "
                f"({prediction['bottleneck']}), {row.ratio:.2f}x {row.status}"
                + (f"; {trip:.1f} ms per version round beyond the model's" if trip else "")
            )
    return "\n".join(lines)


def record(results: dict, study: str, commit: str, command: str, path=CHECKS_CSV) -> list:
    """Appends each measured check of a run's results as a row of results/capacity.csv."""
    meta, out = results["meta"], results["capacity"]
    load = f"{meta['load_average']['capacity'][0]:.1f}-{os.getloadavg()[0]:.1f}"
    context = dict(study=study, date=datetime.date.today().isoformat(), commit=commit)
    context.update(commit_source="recorded", command=command, load=load)
    context.update(platform=meta.get("platform", ""), device=meta.get("device", ""))
    written = []
    for key, check in out["checks"].items():
        for prediction in check.get("predictions", ()):
            row, trip = judged(dict(check, **prediction)), prediction["round_trip_ms"]
            written.append(
                dict(
                    context,
                    check=key.rsplit("-", 1)[0],
                    preset=check["preset"],
                    actors=check["actors"],
                    cores=prediction["cores"],
                    learner="CPU learner",
                    predicted=round(row.figure),
                    measured=round(row.ceiling),
                    ratio=f"{row.ratio:.2f}",
                    holds=row.status,
                    bottleneck=prediction["bottleneck"],
                    note=f"cores: {check['cores_text']}; overrides {check['overrides'] or 'none'}"
                    + (f"; {trip:.1f} ms per round beyond the model's" if trip else ""),
                )
            )
    append_csv(str(path), CHECK_COLUMNS, written)
    return written
