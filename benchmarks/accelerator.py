"""The learner's update on this process's device, per preset: what an accelerator gives.

For each preset, on batches of the learner's shape (its pipeline's `learner_batch` of
random items, `update_ceiling`) already on the device:
- `update`: one update per jitted call (`Agent.update`), updates/s and samples/s;
- `update_many`: K updates per call (`Agent.update_many`, `learner.updates_per_call`),
  for the replay presets;
- `fed`: the learner's feed (`distrl.nodes.feed`) from numpy batches as the replay
  reader yields them, the copy to the device started a group ahead, against the same
  call on device-resident batches (`update` or `update_many`);
- `flops`: XLA's count of one update's floating-point operations, and the share of
  the chip's peak they reach at the measured rate (accelerators with a known peak).
For the gridworld DQN, `td_forms` times the TD loss's gradient written with the
per-example action gathers of `rlax` under `vmap` (how the agent computed it before)
against the one-hot select the agent uses (`agents.base.select_actions`).

Needs no Reverb, Launchpad or TensorFlow (the core on any JAX). Run it once per
platform, each in its own process (a TPU is held by one process at a time):

    python -m benchmarks.accelerator --out=tpu.json
    JAX_PLATFORMS=cpu python -m benchmarks.accelerator --out=cpu.json
    python -m benchmarks.accelerator --compare=cpu.json,tpu.json   # the ratios
    python -m benchmarks.accelerator --rows=tpu.json,cpu.json --commit=<sha> \
        --csv=benchmarks/results/learner_devices.csv      # the records (capacity's input)

Every row carries the platform and the device kind that measured it. `--trace=DIR`
also profiles three resident calls of each case (`update_many`, or `update`) into
`DIR/<case>/` (XProf's format: op by op on the device): where an update's time goes.
"""

import datetime
import json
import os
import sys
import time
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import rlax
from absl import app, flags

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchmarks import learner as learner_bench
from benchmarks.common import append_csv, load_config, measure_rates
from distrl import experiment as experiment_lib
from distrl.agents import dqn
from distrl.nodes import feed as feed_lib
from distrl.types import CoreChunk

# (name, config, overrides): each preset at its own batch; the gridworld DQN at more.
CASES = (
    ("dqn", "dqn", {}),  # [256]
    ("dqn[4096]", "dqn", {"learner.batch_size": 4096}),
    ("dqn[65536]", "dqn", {"learner.batch_size": 65536, "replay.max_size": 131_072}),
    ("dqn_breakout", "dqn_breakout", {}),
    ("sac_pendulum", "sac_pendulum", {}),
    ("td3_pendulum", "td3_pendulum", {}),
    ("r2d2_memory_chain", "r2d2_memory_chain", {}),
    ("ppo", "ppo", {}),
    ("ppo_cartpole", "ppo_cartpole", {}),
    ("ppo_breakout", "ppo_breakout", {}),
    ("ppo_breakout[x4]", "ppo_breakout", {"learner.batch_chunks": 8, "num_actors": 8}),
)
# Peak dense FLOP/s of a chip (bf16, the MXU's), by JAX's device kind.
PEAK_FLOPS = {"TPU v5 lite": 197e12, "TPU v5e": 197e12, "TPU v4": 275e12, "TPU v6 lite": 918e12}

_CASES = flags.DEFINE_list("cases", [c[0] for c in CASES], "Cases to run (names of CASES).")
_SECONDS = flags.DEFINE_float("seconds", 2.0, "Seconds per figure (median of 5 slices).")
_K = flags.DEFINE_integer("k", 32, "Updates per call of the update_many figures.")
_OUT = flags.DEFINE_string("out", "", "Write the rows here as JSON.")
_COMPARE = flags.DEFINE_list("compare", [], "base.json,other.json: print other/base ratios.")
_ROWS = flags.DEFINE_list("rows", [], "Measured JSON files whose rows go to --csv.")
_CSV = flags.DEFINE_string("csv", "", "--rows: append them to this results CSV.")
_COMMIT = flags.DEFINE_string("commit", "", "--rows: the commit the measurement ran on.")
_NOTE = flags.DEFINE_string("note", "", "--rows: the rows' note.")
_TRACE = flags.DEFINE_string("trace", "", "Also write a profiler trace of each case here.")
# benchmarks/results/learner_devices.csv, read by benchmarks/capacity_bench.py
CSV_COLUMNS = (
    "study", "date", "commit", "commit_source", "command", "load", "platform", "device",
    "preset", "figure", "batch", "updates_per_call", "updates_per_s", "samples_per_s", "note",
)  # fmt: skip
FIGURES = {"update": "resident", "update_many": "resident", "fed": "fed", "fed_many": "fed"}
FIGURES.update(td_gather="td_gather", td_one_hot="td_one_hot")  # the two TD forms, resident


def _rows(batch) -> int:
    steps = batch.chunk if isinstance(batch, CoreChunk) else batch
    return int(np.prod(steps.reward.shape))


def _calls(fn, state, batches):
    """A step for `measure_rates` cycling `fn(state, batch)` over `batches`."""
    holder = {"state": state, "i": 0}

    def step():
        holder["state"], metrics = fn(holder["state"], batches[holder["i"] % len(batches)])
        holder["i"] += 1
        return metrics

    return step


def _fed(fn, state, host_items, to_batch, per_call):
    """A step that runs `fn` on the next group of the learner's feed, which reads numpy
    items as the replay reader yields them (cycling over `host_items`)."""

    def reader():
        i = 0
        while True:
            data = host_items[i % len(host_items)]
            yield SimpleNamespace(data=SimpleNamespace(data=data), info=i), 0.0
            i += 1

    put = feed_lib.device_put_for(jax.default_backend())
    feed = feed_lib.Feed(reader(), to_batch, per_call, put, lambda: False)
    holder = {"state": state}

    def step():
        holder["state"], metrics = fn(holder["state"], next(feed).batch)
        return metrics

    return step


def case_rows(
    name: str, config_name: str, overrides: dict, seconds: float, k: int, trace: str = ""
) -> list:
    """The figures of one preset at its learner batch on the default device; with
    `trace`, a profile of its resident calls (`_trace`)."""
    experiment = experiment_lib.make(load_config(config_name, overrides))
    agent, pipeline = experiment.agent, experiment.pipeline
    rng = np.random.default_rng(0)
    items = learner_bench.random_batches(experiment, 4, rng)
    batches = [pipeline.learner_batch(x) for x in items]
    rows = _rows(batches[0])
    state = jax.device_put(agent.init(jax.random.PRNGKey(0)))
    resident = [jax.device_put(b) for b in batches]
    steps = {
        "update": (_calls(agent.update, state, resident), jax.block_until_ready),
        "fed": (
            _fed(agent.update, state, items, pipeline.learner_batch, 1),
            jax.block_until_ready,
        ),
    }
    many = not pipeline.reading(experiment.config).consumed  # replay tables
    if many:
        stacked = [jax.device_put(feed_lib.stack([b] * k)) for b in batches[:2]]  # [K, ...]
        steps["update_many"] = (_calls(agent.update_many, state, stacked), jax.block_until_ready)
        steps["fed_many"] = (
            _fed(agent.update_many, state, items, pipeline.learner_batch, k),
            jax.block_until_ready,
        )
    rates = measure_rates(steps, seconds)
    if trace:
        _trace(os.path.join(trace, name), steps["update_many" if many else "update"][0])
    leading = batches[0].chunk if isinstance(batches[0], CoreChunk) else batches[0]
    shape = str(list(leading.reward.shape))
    out = []
    for figure, calls_per_s in rates.items():
        per_call = k if figure.endswith("many") else 1
        updates = calls_per_s * per_call
        out.append(
            dict(
                case=name,
                figure=figure,
                batch=shape,
                updates_per_call=per_call,
                updates_per_s=updates,
                samples_per_s=updates * rows,
            )
        )
    flops = _flops(agent, state, resident[0])
    if flops:
        out.append(_flops_row(name, flops, rates["update"], rows))
    return out


def _trace(log_dir: str, step, calls: int = 3) -> None:
    """A profile of `calls` compiled calls of `step` into `log_dir` (XProf's format): the
    device's ops with their flops and bytes, few host events, so it stays small."""
    options = jax.profiler.ProfileOptions()
    options.host_tracer_level = 1  # annotations only
    options.python_tracer_level = 0
    options.enable_hlo_proto = True  # each op's flops and bytes for XProf's op tables
    with jax.profiler.trace(log_dir, profiler_options=options):
        for _ in range(calls):
            jax.block_until_ready(step())


def _flops(agent, state, batch) -> float:
    """XLA's count of one update's floating-point operations: from its lowered program
    (no second compile) where the platform counts there, else from the compiled one
    (TPU on JAX 0.10 counts only there); 0 if unknown."""
    lowered = agent.update.lower(state, batch)
    for analysis in (lambda: lowered.cost_analysis(), lambda: lowered.compile().cost_analysis()):
        found = analysis()
        if isinstance(found, list):  # older JAX: one dict per computation
            found = found[0] if found else {}
        if (found or {}).get("flops"):
            return float(found["flops"])
    return 0.0


def _flops_row(name: str, flops: float, updates_per_s: float, rows: int) -> dict:
    peak = PEAK_FLOPS.get(jax.devices()[0].device_kind)
    achieved = flops * updates_per_s
    return dict(
        case=name,
        figure="flops",
        flops_per_update=flops,
        flops_per_s=achieved,
        peak_share=achieved / peak if peak else None,
        updates_per_s=updates_per_s,
        samples_per_s=updates_per_s * rows,
    )


def _td_gather(network, params, target_params, t):
    """One transition's double-Q TD error with per-example gathers (rlax's indexing)."""
    q_tm1 = network.apply(params, t.observation)
    q_t = network.apply(target_params, t.next_observation)
    selector = network.apply(params, t.next_observation)
    return rlax.double_q_learning(q_tm1, t.action, t.reward, t.discount, q_t, selector)


def td_form_rows(seconds: float, batch_size: int = 4096) -> list:
    """The DQN TD loss's gradient, gathers under vmap against the one-hot select."""
    experiment = experiment_lib.make(load_config("dqn", {"learner.batch_size": batch_size}))
    agent, pipeline = experiment.agent, experiment.pipeline
    items = learner_bench.random_batches(experiment, 1, np.random.default_rng(0))[0]
    batch = jax.device_put(pipeline.learner_batch(items))
    params = jax.device_put(agent.init(jax.random.PRNGKey(0)).params)
    net, config = agent.network, agent.config

    def gathered(p):
        td = jax.vmap(_td_gather, in_axes=(None, None, None, 0))(net, p, p, batch)
        return jnp.mean(rlax.huber_loss(td, config.huber_delta))

    def one_hot(p):
        return dqn.loss_fn(net, config, p, p, batch)[0]

    grads = {
        name: jax.jit(jax.grad(fn)) for name, fn in (("gather", gathered), ("one_hot", one_hot))
    }
    steps = {name: (lambda g=g: g(params), jax.block_until_ready) for name, g in grads.items()}
    rates = measure_rates(steps, seconds)
    return [
        dict(
            case=f"dqn_td[{batch_size}]",
            figure=f"td_{name}",
            batch=f"[{batch_size}]",
            updates_per_call=1,
            updates_per_s=r,
            samples_per_s=r * batch_size,
        )
        for name, r in rates.items()
    ]


def measure(cases, seconds: float, k: int, out: str = "", trace: str = "") -> dict:
    """Every case's rows on this process's default device, with its platform and kind;
    written to `out` (JSON) after each case, so a run cut short keeps what it measured."""
    device = jax.devices()[0]
    result = dict(
        platform=jax.default_backend(),
        device=device.device_kind,
        k=k,
        date=datetime.date.today().isoformat(),
        load=f"{os.getloadavg()[0]:.1f}",
        command=" ".join(["python -m benchmarks.accelerator", *sys.argv[1:]]),
        rows=[],
    )
    parts = [
        (name, lambda n=name, c=config_name, o=overrides: case_rows(n, c, o, seconds, k, trace))
        for name, config_name, overrides in CASES
        if name in cases
    ]
    for name, rows in [*parts, ("dqn_td", lambda: td_form_rows(seconds))]:
        began = time.perf_counter()
        result["rows"] += rows()
        print(f"{name}: {time.perf_counter() - began:.1f} s", file=sys.stderr, flush=True)
        if out:
            with open(out, "w") as f:
                json.dump(result, f, indent=1)
    return result


def compare(base: dict, other: dict) -> list:
    """(case, figure, base updates/s, other updates/s, other / base) of the rows both have."""
    index = {(r["case"], r["figure"]): r["updates_per_s"] for r in base["rows"]}
    out = []
    for r in other["rows"]:
        b = index.get((r["case"], r["figure"]))
        if b:
            out.append((r["case"], r["figure"], b, r["updates_per_s"], r["updates_per_s"] / b))
    return out


def csv_rows(result: dict, commit: str, note: str) -> list:
    """The update figures of one measured file as rows of `CSV_COLUMNS`."""
    context = dict(
        study="learner-devices",
        date=result["date"],
        commit=commit,
        commit_source="recorded",
        command=result["command"],
        load=result["load"],
        platform=result["platform"],
        device=result["device"],
        note=note,
    )
    return [
        dict(
            context,
            preset=r["case"],
            figure=FIGURES[r["figure"]],
            batch=r["batch"],
            updates_per_call=r["updates_per_call"],
            updates_per_s=f"{r['updates_per_s']:.4g}",
            samples_per_s=f"{r['samples_per_s']:.4g}",
        )
        for r in result["rows"]
        if r["figure"] in FIGURES
    ]


def _print(result: dict) -> None:
    print(f"{result['platform']} ({result['device']}), K = {result['k']}")
    for r in result["rows"]:
        share = r.get("peak_share")
        extra = f"  {r['flops_per_update']:.3g} flop/update, {share:.2%} of peak" if share else ""
        rates = f"{r['updates_per_s']:>12,.0f} updates/s {r['samples_per_s']:>14,.0f} samples/s"
        print(f"{r['case']:>22} {r['figure']:>12} {rates}{extra}")


def main(argv) -> None:
    del argv
    if _ROWS.value:
        if not (_CSV.value and _COMMIT.value):
            raise app.UsageError("--rows needs --csv and --commit")
        for path in _ROWS.value:
            with open(path) as f:
                rows = csv_rows(json.load(f), _COMMIT.value, _NOTE.value)
            append_csv(_CSV.value, CSV_COLUMNS, rows)
        return
    if _COMPARE.value:
        base, other = (json.load(open(p)) for p in _COMPARE.value)
        print(f"{other['platform']} ({other['device']}) / {base['platform']} ({base['device']})")
        for case, figure, b, o, ratio in compare(base, other):
            print(f"{case:>22} {figure:>12} {b:>12,.0f} {o:>12,.0f} {ratio:>8.2f}x")
        return
    _print(measure(set(_CASES.value), _SECONDS.value, _K.value, _OUT.value, _TRACE.value))


if __name__ == "__main__":
    app.run(main)
