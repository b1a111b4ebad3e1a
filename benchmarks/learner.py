"""Learner-only benchmark: jitted DQN and PPO updates on device-resident batches.

Runs where only the pure-JAX packages are (../shared/STACK.md: no Reverb, Launchpad or
TensorFlow, e.g. a TPU host on Python 3.11): it imports jax, numpy, distrl.agents and
distrl.types alone, unless the sweep's config overrides are given. Two uses:
- the sweep (default): gridworld DQN [N] and PPO [T, M*B] updates at several sizes on
  every device JAX sees, updates/s and samples/s (transitions consumed per second);
- presets (`--presets`): each named preset's own update (its agent, observation shape
  and batch, as `learner_presets.json` describes them; `--describe` rewrites that file
  from the configs, which needs the full stack), K updates per jitted call
  (`--updates-per-call`: a scan over K stacked batches; the learner node runs 1), on
  this process's default device; `--csv` appends the rows to a results CSV
  (benchmarks/results/learner_devices.csv, read by `benchmarks/capacity.py`).
Every row names its platform and device kind. `benchmarks/ceilings.py` uses the same
`update_rate` for the update ceilings of `make bench`.

    python benchmarks/learner.py                        # small CPU sweep
    python benchmarks/learner.py --dqn-batches=256,4096,65536 --ppo-chunks=2,64,1024
    python benchmarks/learner.py --config.agent.hidden_sizes='(256, 256)' --dqn.agent.n_step=3
    python benchmarks/learner.py --presets=dqn,ppo --updates-per-call=1,8 \
        --csv=benchmarks/results/learner_devices.csv [--commit=<sha>]
    python -m benchmarks.learner --describe              # rewrite learner_presets.json

The sweep's agents are configs/dqn.py's and configs/ppo.py's, with their agent fields
overridden as launch/train.py takes them: `--config.agent.<field>=<value>` for both,
`--dqn.agent.<field>=<value>` / `--ppo.agent.<field>=<value>` for one.
"""

import datetime
import json
import math
import os
import subprocess
import sys
import time

import jax
import numpy as np
from absl import flags

from distrl import agents
from distrl.errors import ConfigError

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchmarks.common import append_csv, device_fields, head_commit, measure_rate
from benchmarks.learner_specs import (
    ALGOS,
    PRESETS,
    PRESETS_FILE,
    BatchSpec,
    gridworld_spec,
    load_presets,
    random_batch,
    write_presets,
)

CSV_COLUMNS = (
    "study", "date", "commit", "commit_source", "command", "load", "platform", "device",
    "preset", "batch", "updates_per_call", "updates_per_s", "samples_per_s", "note",
)  # fmt: skip
FORBIDDEN = ("tensorflow", "reverb", "launchpad", "courier")


def update_rate(agent, batches, device, seconds: float, updates_per_call: int = 1) -> float:
    """Updates/s of `agent.update` cycling over `batches`, all resident on `device`;
    with `updates_per_call` K > 1, one jitted call scans K updates over K stacked
    batches."""
    state = jax.device_put(agent.init(jax.random.PRNGKey(0)), device)
    update = agent.update
    if updates_per_call > 1:
        k = updates_per_call
        batches = [
            jax.tree.map(
                lambda *x: np.stack(x), *(batches[(i + j) % len(batches)] for j in range(k))
            )
            for i in range(len(batches))
        ]
        update = jax.jit(lambda state, stacked: jax.lax.scan(agent.update, state, stacked))
    batches = [jax.device_put(b, device) for b in batches]
    holder = {"state": state, "i": 0}

    def step():
        batch = batches[holder["i"] % len(batches)]
        holder["state"], metrics = update(holder["state"], batch)
        holder["i"] += 1
        return metrics

    return updates_per_call * measure_rate(step, seconds, sync=jax.block_until_ready)


def spec_update_rate(spec: BatchSpec, device, seconds: float, updates_per_call: int = 1) -> dict:
    """{'updates_per_s', 'samples_per_s'} of `spec`'s update on `device`."""
    shape = tuple(spec.observation_shape)
    env_spec = agents.EnvSpec(int(np.prod(shape)), spec.num_actions, shape)
    agent = agents.make_agent(agents.config_of(spec.algorithm, spec.agent), env_spec)
    rng = np.random.default_rng(0)
    batches = [random_batch(spec, rng) for _ in range(2)]
    rate = update_rate(agent, batches, device, seconds, updates_per_call)
    return {"updates_per_s": rate, "samples_per_s": rate * spec.samples}


def sweep(dqn_batches, ppo_chunks, seconds: float, t=16, envs_per_chunk=64, agent_configs=None):
    """Rows for every device x algorithm x size (PPO: M chunks of [T, B] -> [T, M*B]);
    `agent_configs`: {'dqn' | 'ppo': agent config dataclass} (default: the presets')."""
    agent_configs = agent_configs or {}
    sizes = [("dqn", (n,)) for n in dqn_batches]
    sizes += [("ppo", (t, m * envs_per_chunk)) for m in ppo_chunks]
    rows = []
    for device in _devices():
        for algo, batch in sizes:
            spec = gridworld_spec(algo, batch, agent_configs.get(algo))
            figures = spec_update_rate(spec, device, seconds)
            rows.append(dict(**device_fields(device), algo=algo, batch=_shape(batch), **figures))
    return rows


def measure_presets(specs: dict, seconds: float, updates_per_call=(1,)) -> list:
    """Rows for each preset ({name: BatchSpec}) x K on this process's default device."""
    device = jax.devices()[0]
    rows = []
    for name, spec in specs.items():
        for k in updates_per_call:
            figures = spec_update_rate(spec, device, seconds, k)
            rows.append(
                dict(**device_fields(device), preset=name, batch=_shape(spec.batch))
                | dict(updates_per_call=k, **figures)
            )
    return rows


def _shape(batch) -> str:
    return "[" + ", ".join(str(n) for n in batch) + "]"


def _devices() -> list:
    """The first device of every platform JAX sees (CPU always, GPU or TPU when present)."""
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
import distrl.agents, distrl.envs, distrl.types
loaded = sorted({{m.split('.')[0] for m in sys.modules}} & set({forbidden!r}))
print(json.dumps(loaded))
"""


def import_check() -> dict:
    """What importing distrl's pure layers loads, in fresh interpreters.

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
        if block:
            out["works_without"] = ok
        else:
            last = proc.stdout.strip().splitlines()[-1] if ok else ""
            out["loaded"] = json.loads(last) if ok else f"import failed: {proc.stderr[-300:]}"
    return out


def _agent_fields_only(overrides) -> None:
    """The update alone is timed: an override outside the agent section changes nothing."""
    for name in ("config", *ALGOS):
        values = overrides.common if name == "config" else overrides.own.get(name, {})
        for path in values:
            if not path.startswith("agent."):
                raise ConfigError(
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
    flags.DEFINE_list("presets", [], "Time these presets' own updates.", flag_values=values)
    flags.DEFINE_list(
        "updates-per-call", ["1"], "--presets: K per jitted call.", flag_values=values
    )
    for name in ("dqn-batches", "ppo-chunks", "updates-per-call"):
        flags.register_validator(
            name,
            lambda v: all(x.isdigit() and int(x) > 0 for x in v),
            "positive integers",
            flag_values=values,
        )
    flags.DEFINE_float("seconds", 1.5, "Timing per row.", flag_values=values)
    flags.DEFINE_string("json", "", "Also write the rows here.", flag_values=values)
    flags.DEFINE_string("csv", "", "--presets: append the rows to this CSV.", flag_values=values)
    flags.DEFINE_string("study", "learner-devices", "--csv: the rows' study.", flag_values=values)
    flags.DEFINE_string(
        "commit", "", "--csv: the commit that ran (default: HEAD)", flag_values=values
    )
    flags.DEFINE_string("note", "", "--csv: the rows' note.", flag_values=values)
    flags.DEFINE_bool("describe", False, f"Rewrite {PRESETS_FILE}.", flag_values=values)
    return values


def _sweep_main(args, argv) -> list:
    """The gridworld sweep with the command's config overrides (the full stack)."""
    from benchmarks.common import configs_of, load_config  # noqa: PLC0415
    from distrl import cli  # noqa: PLC0415
    from distrl import experiment as experiment_lib  # noqa: PLC0415

    given = cli.parse_several(
        args, argv, lambda _: configs_of(ALGOS), check=_agent_fields_only, usage=__doc__
    )
    agent_configs = {
        algo: experiment_lib.Experiment(load_config(algo, given.of(algo))).agent_config
        for algo in ALGOS
    }
    return sweep(
        [int(n) for n in args["dqn-batches"].value],
        [int(m) for m in args["ppo-chunks"].value],
        args.seconds,
        agent_configs=agent_configs,
    )


def _csv_rows(args, argv, rows, load: tuple) -> list:
    """The rows as `CSV_COLUMNS` of a results CSV: a commit in history (a clean tree's
    HEAD, or `--commit` where no git is, e.g. on a device machine) and the command that
    measures them again."""
    commit, dirty = (args.commit, False) if args.commit else head_commit()
    if not commit or dirty:
        raise SystemExit("--csv: uncommitted changes or no git: commit, or pass --commit=<sha>")
    recorded = ("--csv", "--commit", "--note", "--study", "--json")
    command = " ".join(
        ["python benchmarks/learner.py"] + [a for a in argv[1:] if not a.startswith(recorded)]
    )
    context = dict(
        study=args.study,
        date=datetime.date.today().isoformat(),
        commit=commit,
        commit_source="recorded",
        command=command,
        load=f"{load[0]:.1f}-{load[1]:.1f}",
        note=args.note,
    )
    return [dict(context, **{k: _csv_value(v) for k, v in row.items()}) for row in rows]


def _csv_value(value):
    """A rate as a CSV cell: 4 significant digits, never in exponent form."""
    if not isinstance(value, float):
        return value
    return f"{value:.{max(0, 3 - math.floor(math.log10(abs(value) or 1)))}f}"


def _print(rows) -> None:
    print(
        f"{'platform':<9} {'device':<14} {'what':<32} {'K':>3} {'updates/s':>12} {'samples/s':>14}"
    )
    for r in rows:
        what, k = f"{r.get('preset') or r['algo']} {r['batch']}", r.get("updates_per_call", 1)
        print(
            f"{r['platform']:<9} {r['device'][:14]:<14} {what:<32} {k:>3} "
            f"{r['updates_per_s']:>12,.1f} {r['samples_per_s']:>14,.0f}"
        )


def _presets_main(args) -> list:
    """`--presets`: each preset's update on this process's default device (pure JAX)."""
    specs = load_presets()
    unknown = sorted(set(args.presets) - set(specs))
    if unknown:
        raise SystemExit(f"--presets: {unknown} not in {PRESETS_FILE} (--describe adds them)")
    ks = [int(k) for k in args["updates-per-call"].value]
    return measure_presets({n: specs[n] for n in args.presets}, args.seconds, ks)


def main(argv=None) -> list:
    args = _flags()
    argv = [sys.argv[0], *(sys.argv[1:] if argv is None else argv)]
    try:
        rest = args(argv, known_only=True)
    except flags.Error as err:
        print(f"bad flag: {err}", file=sys.stderr)
        sys.exit(2)
    if (args.describe or args.presets) and len(rest) > 1:
        print(f"bad flag: {rest[1]}: --presets and --describe take no overrides", file=sys.stderr)
        sys.exit(2)
    if args.describe:
        write_presets(args.presets or PRESETS)
        print(f"wrote {PRESETS_FILE}")
        return []
    start, load = time.perf_counter(), os.getloadavg()[0]
    rows = _presets_main(args) if args.presets else _sweep_main(args, argv)
    _print(rows)
    if args.csv:
        append_csv(args.csv, CSV_COLUMNS, _csv_rows(args, argv, rows, (load, os.getloadavg()[0])))
    out = {"rows": rows}
    if not args.presets:
        out["import_check"] = check = import_check()
        print(
            f"pure-layer imports: loaded {check['loaded']}; "
            f"import with tensorflow/reverb/launchpad blocked: "
            f"{'ok' if check['works_without'] else 'FAILS'}  ({time.perf_counter() - start:.0f} s)"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
    return rows


if __name__ == "__main__":
    main()
