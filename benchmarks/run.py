"""`make bench`: every pipeline stage against its own ceiling, side by side, in one run.

Runs the sections in order (ceilings first), keeps every raw result in
`runs/bench-<time>/bench.json` (rewritten after each section, so an interrupted
run keeps what it measured), and prints one table (also `bench.md` there) with each
row's figure, ceiling, ratio, goal and whether the goal holds.

    python benchmarks/run.py                   # everything, under 12 minutes
    python benchmarks/run.py --quick           # shorter windows and caps
    python benchmarks/run.py --only=ceilings,stages
    python benchmarks/run.py --report=runs/bench-<time>/bench.json   # re-print a run
    python benchmarks/run.py --config.actor.num_envs=256      # what-if: every algorithm
    python benchmarks/run.py --dqn.replay.item_steps=4 --dqn.replay.min_size=1024  # DQN's

Sections: ceilings, host, stages, e2e, solve, local, local_sac, minatar, slippery (see
README.md), recurrent (rows.RECURRENT's actors against a jitted scan carrying
the core's state, their jitted updates, then their learners alone in stage programs),
capacity (the capacity model's inputs measured here, its predictions for hosts of 2 to
208 cores, and its check against the program with 1 and 2 actors;
benchmarks/capacity_bench.py). `--record=STUDY` appends the capacity check's rows to
benchmarks/results/capacity.csv (from a clean tree: the rows name HEAD).
Config overrides, as launch/train.py takes them: `--config.<section>.<field>=<value>` changes every
algorithm's config in every run of the bench, `--dqn.<section>.<field>=<value>` or
`--ppo.<section>.<field>=<value>` that algorithm's alone (over `--config.`'s). Every
config they make is validated before any section starts: a bad flag, field or
value, or an invalid config, exits 2 with one line.
"""

import dataclasses
import os
import sys
import time
import traceback

if __package__ in (None, ""):  # `python benchmarks/run.py`: make `benchmarks` importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import flags

from benchmarks import report, rows
from benchmarks.common import (
    ROOT,
    configs_of,
    device_fields,
    head_commit,
    load_config,
    python_cmd,
    read_json,
    run_subprocess,
    write_json,
)
from distrl import cli
from distrl import experiment as experiment_lib

SECTIONS = (
    "ceilings",
    "host",
    "stages",
    "e2e",
    "solve",
    "local",
    "local_sac",
    "minatar",
    "slippery",
    "recurrent",
    "capacity",
)

# Seconds per setting, full run / --quick.
SETTINGS = {
    "full": {
        "ceiling_s": 1.5,
        "warmup": 2.0,
        "window": 6.0,
        "solve_cap": 60.0,
        "slippery_cap": 120.0,
        "local_cap": 150.0,
        "fused_iterations": 8,  # local.iterations_per_call of section local_sac
        "fused_calls": 3,  # its calls timed after the first (iterations 9-32: one evaluation)
        "minatar_s": 3.0,
        "trainer_s": 45.0,
        "recurrent_s": 3.0,  # section recurrent: the actor against its scan, the update
    },
    "quick": {
        "ceiling_s": 0.5,
        "warmup": 1.0,
        "window": 3.0,
        "solve_cap": 30.0,
        "slippery_cap": 30.0,
        "local_cap": 90.0,
        "fused_iterations": 4,
        "fused_calls": 2,
        "minatar_s": 1.0,
        "trainer_s": 10.0,
        "recurrent_s": 1.0,
    },
}


class Bench:
    """One benchmark run: its directory, settings, deadline and accumulated results."""

    def __init__(self, run_dir: str, settings: dict, deadline_s: float, overrides=None):
        self.dir = run_dir
        self.s = settings
        self.given = overrides or cli.Overrides({}, {})  # --config. / --<algo>. overrides
        self.deadline = time.time() + deadline_s
        self.results = {
            "meta": {
                "started": time.strftime("%Y-%m-%d %H:%M:%S"),
                "cpus": os.cpu_count(),
                **device_fields(),  # every row's platform and device: this process's JAX
                "settings": settings,
                "overrides": dataclasses.asdict(self.given),
                "load_average": {},
                "section_seconds": {},
            }
        }

    def left(self) -> float:
        return self.deadline - time.time()

    def path(self, *parts: str) -> str:
        return os.path.join(self.dir, *parts)

    def save(self) -> None:
        write_json(self.path("bench.json"), self.results)

    def overrides(self, algo: str) -> dict:
        """The command's config overrides for `algo`."""
        return self.given.of(algo)

    # -- sections ---------------------------------------------------------------
    def ceilings(self) -> None:
        from benchmarks import ceilings

        configs = {algo: load_config(algo, self.overrides(algo)) for algo in rows.ALGOS}
        self.results["ceilings"] = ceilings.measure_all(configs, self.s["ceiling_s"])
        presets = {name: load_config(name, self.overrides(name)) for name in rows.ENV_PRESETS}
        self.results["ceilings"].update(ceilings.measure_actors(presets, self.s["ceiling_s"]))
        learners = {name: load_config(name, self.overrides(name)) for name in rows.LEARNERS}
        self.results["ceilings"].update(ceilings.measure_updates(learners, self.s["ceiling_s"]))

    def host(self) -> None:
        """The host-stepped actor (gymnasium CartPole) against its vector env alone."""
        from benchmarks import host_env

        out = self.path("host.json")  # measured in a process set up as an actor node
        window = self.s["window"] / 2
        self.results["host"] = host_env.run(out, rows.ALGOS, window, rows.HOST_TOGETHER)

    def stages(self) -> None:
        """One program: each algorithm's actor alone, then its learner alone; each env
        preset's actor alone (rows.ENV_PRESETS). A second program: each learner
        preset's actor filling its table, then its learner alone (rows.LEARNERS); a
        program of its own, so that each stays within its subprocess's time cap."""
        self.results["stages"] = {}
        for names in (rows.ALGOS + rows.ENV_PRESETS, rows.LEARNERS):
            measured = self._program("stage", names, 1)
            self.results["stages"].update(
                {
                    algo: {
                        "actor": measured.get(f"{algo}-actor"),
                        "learner": measured.get(f"{algo}-learner"),
                        "error": measured.get("error"),
                        "wall": measured["wall"],
                    }
                    for algo in names
                }
            )
            self.save()

    def e2e(self) -> None:
        """distrl's own program for each algorithm: rates, start-up, memory per node."""
        out = self.results.setdefault("e2e", {})
        variants = [(algo, algo, {}) for algo in rows.ALGOS]
        # What PPO's fresh data costs: the same program with asynchronous acting.
        variants.append(("ppo_async", "ppo", {"actor.chunks_per_version": 0}))
        for name, algo, extra in variants:
            measured = self._program("e2e", [algo], rows.E2E_ACTORS, extra, tag=name)
            out[name] = dict(measured.pop("e2e", None) or {}, **measured)
            self.save()

    def _program(
        self,
        mode: str,
        algos,
        actors: int,
        extra=None,
        tag: str = "",
        warmup=None,
        window=None,
        spi: float = 1.0,
        actors_only=None,
    ) -> dict:
        """Runs one benchmarks.stages program in a subprocess; {phase: figures}, wall,
        and for e2e its start-up and memory. `extra`: overrides of every algorithm's
        config on top of the command's `--config.` ones; warmup, window: seconds
        (None: the settings'); `spi`: DQN's samples per insert (0: the config's);
        `actors_only`: the names timed without a learner (None: the env presets)."""
        if actors_only is None:
            actors_only = [a for a in algos if a in rows.ENV_PRESETS]
        from benchmarks import stages

        run_dir = self.path(f"{mode}-{tag or '-'.join(algos)}-{actors}")
        extra = extra or {}
        # only this program's configs' own overrides: its command knows no other config
        own = {name: v for name, v in self.given.own.items() if name in algos}
        overrides = cli.Overrides({**self.given.common, **extra}, own)
        flags = [
            f"--mode={mode}",
            f"--algo={','.join(algos)}",
            f"--actors_only={','.join(actors_only)}",
            f"--actors={actors}",
            f"--spi={spi:g}",
            f"--warmup={self.s['warmup'] if warmup is None else warmup}",
            f"--window={self.s['window'] if window is None else window}",
            f"--run-dir={run_dir}",
            *overrides.flags(),
        ]
        monitor = os.path.join(run_dir, "monitor.json")
        if os.path.exists(monitor):  # an earlier run's, in a reused --out: it would end this one
            os.remove(monitor)
        proc = run_subprocess(
            python_cmd("benchmarks.stages", *flags),
            # the phases' own waits (actor 120 s, learner 300 s: stages.py) fit inside,
            # with start-up (a cap of 300 s can cut a recurrent learner's phase short)
            timeout=min(600.0, max(self.left(), 60.0)),
            log_path=run_dir + ".log",
            env={"LAUNCHPAD_LOGGING_DIR": os.path.join(run_dir, "nodes")},
            done_file=monitor,
            grace=1.0,
        )
        data = read_json(monitor) or {}
        out = {
            "wall": proc["wall"],
            "error": data.get("error")
            or (None if data else f"no measurement (rc {proc['rc']}, see {proc['log']})"),
        }
        summaries = {
            "actor": stages.summarize_actor,
            "learner": stages.summarize_learner,
            "e2e": stages.summarize_e2e,
        }
        for name, phase in data.get("phases", {}).items():
            algo = algos[0] if name == "e2e" else name.split("-")[0]
            config = stages.bench_config(
                algo,
                actors,
                spi,
                extra={**self.overrides(algo), **extra},
                fixed_params=mode == "stage",
            )
            if len(phase.get("snapshots", ())) < 2:
                out[name] = {"error": phase.get("error", "no counter answer in the window")}
                continue
            figures = summaries[name.split("-")[-1]](phase, config)
            out[name] = dict(figures, start_delay=phase["start_delay"])
        if mode == "e2e" and data:
            out["startup"] = stages.summarize_startup(data.get("first_seen", {}), actors)
            out["memory"] = stages.summarize_memory(data.get("memory", {}))
        return out

    def solve(self) -> None:
        """launch/train.py, 4x4, 2 actors, local_mp, per algorithm: start to exit."""
        from benchmarks import solve

        out = self.results.setdefault("solve", {})
        for algo in rows.ALGOS:
            cap = min(self.s["solve_cap"], max(self.left() / 4, 10.0))
            out[algo] = solve.distributed(
                algo, 2, self.path(f"solve-{algo}"), cap, self.overrides(algo)
            )
            self.save()

    def local(self) -> None:
        """The single-process trainer on a slippery 8x8 preset (rows.LOCAL_PRESET), the
        way a user runs it against benchmarks/slippery.py's settings, one after the other."""
        from benchmarks import slippery

        name, seed = rows.LOCAL_PRESET
        cap = min(self.s["local_cap"], (self.left() - 60) / 2)
        if cap < 30:
            self.results["local"] = {"error": f"skipped: {self.left():.0f} s left of the budget"}
            return
        self.results["local"] = slippery.as_a_user(name, seed, self.path("local"), cap)

    def local_sac(self) -> None:
        """distrl.local on a Box replay preset (configs/sac_pendulum.py, SAC on gymnax
        Pendulum-v1) against one fused jitted loop of the same work, one after the other."""
        from benchmarks import fused

        name = fused.PRESET
        given = {"local.iterations_per_call": self.s["fused_iterations"], **self.overrides(name)}
        config = load_config(name, given)
        self.results["local_sac"] = fused.measure(config, self.s["fused_calls"], name)

    def minatar(self) -> None:
        """The Breakout-MinAtar presets' stages against their ceilings."""
        from benchmarks import minatar

        configs = {name: load_config(name, self.overrides(name)) for name in minatar.PRESETS}
        out = self.results.setdefault("minatar", {})
        minatar.measure(configs, self.s["minatar_s"], self.s["trainer_s"], out, self.save)
        # The distributed program on the trainer's preset, against the same fused loop:
        # a window of several updates (one takes about 0.4 s), after compilation.
        name = minatar.TRAINER_PRESET
        window = {"warmup": self.s["trainer_s"] / 3, "window": self.s["trainer_s"] / 2}
        measured = self._program("e2e", [name], rows.E2E_ACTORS, tag=name, **window)
        out["distributed"] = dict(measured.pop("e2e", None) or {}, **measured)
        self.save()

    def slippery(self) -> None:
        from benchmarks import solve

        opt = solve.optimal_success("8x8")  # pi* at discount 0.99, as the configs'
        target = round(0.95 * opt["greedy_success"], 3)
        out = self.results.setdefault("slippery", {})
        out["optimal"] = dict(opt, target=target)
        # configs/<algo>_slippery8x8.py (the 4x4 presets do not learn this map: PPO's
        # stayed at success 0 for 6M env steps), confirmed at 95% instead of 98%.
        overrides = {"evaluator.target_of_optimal": 0.95}
        for i, algo in enumerate(rows.ALGOS):
            cap = min(self.s["slippery_cap"], (self.left() - 30) / (2 - i) - 30)
            if cap < 15:
                out[algo] = {"error": f"skipped: {self.left():.0f} s left of the time budget"}
                continue
            out[algo] = solve.distributed(
                f"{algo}_slippery8x8",
                2,
                self.path(f"slippery-{algo}"),
                cap,
                {**self.overrides(algo), **overrides},
            )
            self.save()

    def recurrent(self) -> None:
        """Each recurrent preset (rows.RECURRENT): its actor's rollout and
        compute against a jitted scan of the same env and network carrying the core's
        state, in alternating slices; its jitted update on device batches; then, in a
        stage program (one for all of them), its real Actor filling its table and its
        real Learner alone on it (PPO's chunks, R2D2's sequences sampled from Reverb), so
        each learner's ratio divides two figures of this section."""
        from benchmarks import ceilings

        out = self.results.setdefault("recurrent", {})
        seconds = self.s["recurrent_s"]
        for name in rows.RECURRENT:
            config = load_config(name, self.overrides(name))
            out[name] = {
                "actor": ceilings.against_scan(config, seconds),
                "update": ceilings.update_ceiling(config, seconds),
            }
            self.save()
        measured = self._program("stage", list(rows.RECURRENT), 1)  # one program for all
        for name in rows.RECURRENT:
            out[name].update(
                learner=measured.get(f"{name}-learner"),
                stage_actor=measured.get(f"{name}-actor"),
                error=measured.get("error"),
                wall=measured["wall"],
            )
        self.save()

    def capacity(self) -> None:
        """The capacity model's inputs here, its predictions and its check (see
        benchmarks/capacity_bench.py); the report also goes to capacity.md."""
        from benchmarks import capacity_bench

        out = capacity_bench.measure(self)
        text = capacity_bench.summary(out)
        with open(self.path("capacity.md"), "w") as f:
            f.write(text + "\n")
        print(text, flush=True)


def run_sections(bench: Bench, names) -> None:
    """Runs each named section; a failure is recorded and the next one still runs."""
    for name in names:
        start = time.time()
        bench.results["meta"]["load_average"][name] = os.getloadavg()
        print(f"bench: {name} ... ({bench.left():.0f} s of budget left)", flush=True)
        try:
            getattr(bench, name)()
        except Exception:  # noqa: BLE001 - keep the other sections' results
            bench.results.setdefault("errors", {})[name] = traceback.format_exc()
            print(f"bench: {name} failed:\n{traceback.format_exc()}", flush=True)
        bench.results["meta"]["section_seconds"][name] = time.time() - start
        bench.save()


def publish(results, run_dir: str) -> str:
    """Rows -> bench.json ('rows') and bench.md; returns the markdown table."""
    table_rows = rows.build_rows(results)
    results["rows"] = [row.as_dict() for row in table_rows]
    table = report.to_markdown(table_rows)
    meta = results.get("meta", {})
    header = (
        f"distrl benchmark, {meta.get('started')} on {meta.get('cpus')} CPUs, JAX "
        f"{meta.get('platform', '?')} ({meta.get('device', '?')}); "
        f"load average per section: "
        + ", ".join(f"{k} {v[0]:.1f}" for k, v in meta.get("load_average", {}).items())
    )
    with open(os.path.join(run_dir, "bench.md"), "w") as f:
        f.write(f"{header}\n\n{table}\n")
    write_json(os.path.join(run_dir, "bench.json"), results)
    return f"{header}\n\n{table}"


def _validate(overrides) -> None:
    """Every algorithm's config with the overrides, validated before anything starts
    (ConfigError for one they make invalid, e.g. replay.item_steps=4 without a
    min_size of whole items)."""
    for algo in rows.CONFIGS:
        experiment_lib.make(load_config(algo, overrides.of(algo)))


def _flags():
    """The bench's own flags (the config overrides come with `cli.parse_several`)."""
    values = flags.FlagValues()
    flags.DEFINE_bool("quick", False, "Short windows and caps.", flag_values=values)
    flags.DEFINE_string("only", "", f"Comma-separated subset of {SECTIONS}.", flag_values=values)
    flags.DEFINE_string("out", "", "Run directory (default runs/bench-<time>).", flag_values=values)
    flags.DEFINE_float("budget", 720.0, "Seconds for everything.", flag_values=values)
    flags.DEFINE_string("report", "", "Re-print the table of a bench.json.", flag_values=values)
    flags.DEFINE_string(
        "record", "", "Study: append the capacity check to results/.", flag_values=values
    )
    return values


def main(argv=None) -> int:
    args = _flags()
    argv = [sys.argv[0], *(sys.argv[1:] if argv is None else argv)]
    overrides = cli.parse_several(
        args,
        argv,
        lambda _: configs_of(rows.CONFIGS),
        check=_validate,
        usage=__doc__,
    )
    if args.report:
        results = read_json(args.report)
        if results is None:
            cli.fail(f"bad flag: --report={args.report}: no such file")
        print(publish(results, os.path.dirname(os.path.abspath(args.report))))
        return 0
    names = [n for n in args.only.split(",") if n] or list(SECTIONS)
    unknown = sorted(set(names) - set(SECTIONS))
    if unknown:
        cli.fail(f"bad flag: --only: unknown section(s) {unknown}; valid: {', '.join(SECTIONS)}")
    commit, dirty = head_commit() if args.record else ("", False)
    if args.record and ("capacity" not in names or dirty):
        cli.fail("bad flag: --record takes --only=capacity's rows, from a clean tree (HEAD ran)")
    run_dir = os.path.abspath(
        args.out or os.path.join(ROOT, "runs", f"bench-{time.strftime('%Y%m%d-%H%M%S')}")
    )
    os.makedirs(run_dir, exist_ok=True)
    bench = Bench(run_dir, SETTINGS["quick" if args.quick else "full"], args.budget, overrides)
    start = time.time()
    run_sections(bench, [n for n in SECTIONS if n in names])
    bench.results["meta"]["total_seconds"] = time.time() - start
    print(publish(bench.results, run_dir))
    print(f"\nbench: {time.time() - start:.0f} s; results in {run_dir}/bench.json and bench.md")
    if args.record and "capacity" in bench.results:
        from benchmarks import capacity_bench

        command = " ".join(["python -m benchmarks.capacity", *_recorded(argv[1:])])
        written = capacity_bench.record(bench.results, args.record, commit, command)
        print(f"bench: {len(written)} rows to {capacity_bench.CHECKS_CSV}")
    return 0


def _recorded(args) -> list:
    """The command's flags that measure its rows again (not where they went)."""
    return [a for a in args if not a.startswith(("--record", "--out", "--only"))]


if __name__ == "__main__":
    sys.exit(main())
