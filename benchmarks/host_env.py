"""The host-stepped actor against the env itself.

For gymnasium's CartPole-v1 it measures, in env steps/s:
  - random: the actor's vector env itself (`VectorStepper.vector`: B checked copies,
    SAME_STEP autoreset, synchronous) stepped with random actions, no policy and
    nothing of distrl's around the step (the ceiling); in the note, gymnasium's own
    SyncVectorEnv of unchecked copies;
  - <algo>: `host_rollout.HostAct` as an actor runs it, each step one jitted batched
    policy call, each chunk of T steps the pipeline's item function and one packed
    copy off the device (no Reverb: the write is measured by the other rows), with
    the step deadline (`env.step_timeout_s=60`) and without it;
  - vector: the same at B=4 with the copies synchronous and in subprocesses
    (`env.vector=async`), env alone and DQN actor;
  - together: 1, 2 and 4 actor processes stepping at once (each its own vector env
    of B copies and its own policy, DQN), each one's env steps/s and the CPU cores
    it used (its user + system time over the window, `resource.getrusage`);
  - continuous: gymnasium's MuJoCo HalfCheetah-v5 (Box actions), its
    vector env alone with uniform random actions in the Box against SAC's host
    actor on it (configs/sac_pendulum.py's agent with the env in its place), the
    same B copies; an error entry where mujoco is not installed.
Every actor acts with epsilon 1 (DQN's actions then random, as the env alone's: its
untrained greedy actions end CartPole episodes after 9.5 steps against 22, and each
end costs a reset inside the step; PPO's untrained policy is near uniform anyway),
the mean episode lengths are reported. The measuring process is set up as an
actor node is (`nodeenv`'s actor variables: one XLA thread, JAX on the CPU;
`host_rollout.synchronous_dispatch`), whether `make bench` starts it or
`python benchmarks/host_env.py --out=FILE` (prints the figures too). In one process
the figures take turns slice by slice (slices of at most a quarter second, each
figure the best of its slices), so that each ratio compares two figures under the
same load.
"""

import json
import os
import resource
import subprocess
import sys
import time
from typing import NamedTuple

if __package__ in (None, ""):  # `python benchmarks/host_env.py`
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax
import numpy as np

ENV = "gymnasium:CartPole-v1"
CONTINUOUS = ("gymnasium:HalfCheetah-v5", "sac_pendulum")  # (env, the config of its actor)
_AS_ACTOR = "DISTRL_HOST_BENCH_AS_ACTOR"  # set in the measuring process (`actor_environment`)
ASYNC_ENVS = 4  # subprocess copies: at most 4 on the shared 2-core machine


class Rate(NamedTuple):
    """A slice's env steps/s (wall clock) and the process's CPU time per env step (us):
    with synchronous dispatch and one XLA thread an actor's work all runs in its
    thread, so the CPU figure is what a step costs on a quiet core, whatever the load."""

    steps_per_s: float
    cpu_us_per_step: float


def _timed(slice_s: float, step) -> Rate:
    """`step()` (-> env steps taken) called for `slice_s` seconds."""
    steps, start, cpu = 0, time.perf_counter(), time.process_time()
    while time.perf_counter() - start < slice_s:
        steps += step()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - start
    return Rate(steps / wall, 1e6 * cpu / max(steps, 1))


def _random_rate(vector, num_envs: int, seconds: float, ends: dict | None = None) -> Rate:
    """`vector` stepped with random actions; `ends` counts steps and episode ends."""
    rng = np.random.default_rng(0)
    space = vector.single_action_space
    ends = {} if ends is None else ends

    def random_actions():
        if hasattr(space, "n"):
            return rng.integers(0, int(space.n), num_envs)
        shape = (num_envs, *space.shape)
        return rng.uniform(space.low, space.high, shape).astype(space.dtype)

    def step():
        _, _, terminated, truncated, _ = vector.step(random_actions())
        ends["episodes"] = ends.get("episodes", 0) + int(np.sum(terminated | truncated))
        ends["steps"] = ends.get("steps", 0) + num_envs
        return num_envs

    return _timed(seconds, step)


def _gymnasium_vector(num_envs: int):
    """gymnasium's own SyncVectorEnv of unchecked CartPole-v1 copies (SAME_STEP)."""
    import gymnasium  # noqa: PLC0415

    makers = [lambda: gymnasium.make(ENV.split(":")[1]) for _ in range(num_envs)]
    mode = gymnasium.vector.AutoresetMode.SAME_STEP
    vector = gymnasium.vector.SyncVectorEnv(makers, copy=False, autoreset_mode=mode)
    vector.reset(seed=0)
    return vector


def _actor(algo: str, num_envs: int, timeout_s: float, vector: str = "sync", env_name=ENV):
    from benchmarks.common import load_config  # noqa: PLC0415
    from distrl import experiment as experiment_lib  # noqa: PLC0415
    from distrl import pipelines  # noqa: PLC0415
    from distrl.acting import host_rollout  # noqa: PLC0415

    c = load_config(algo, {"env.name": env_name, "actor.num_envs": num_envs})
    c.env.step_timeout_s, c.env.vector = timeout_s, vector
    experiment = experiment_lib.Experiment(c)
    env, agent = experiment.env, experiment.agent
    to_items = pipelines.of(agent.config).item_fn(agent.config, c, env)
    act = host_rollout.make_act(env, agent.policy, c, to_items)
    params = agent.init(jax.random.PRNGKey(0)).params
    state = dict(carry=act.init_carry(0), tail=None, key=jax.random.PRNGKey(1))
    return Acting(act, params, state, c.actor.unroll_length * num_envs)


# A chunk's key in one dispatch, as the actor node splits it (`nodes.actor._split_key`):
# an eager `jax.random.split` is several dispatches per chunk.
_split_key = jax.jit(lambda key: tuple(jax.random.split(key)))


class Acting:
    """One actor's `HostAct` with its params and carry, run for windows of seconds."""

    def __init__(self, act, params, state, steps_per_call: int):
        self.act, self.params, self.state, self.steps_per_call = act, params, state, steps_per_call
        self.ends = {"episodes": 0, "length_sum": 0}

    def rate(self, seconds: float) -> Rate:
        """Acting for `seconds` with epsilon 1 (see the module docstring)."""
        state = self.state

        def step():
            key, step_key = _split_key(state["key"])
            (carry, tail), packed = self.act(
                self.params, state["carry"], step_key, 1.0, state["tail"]
            )
            _, stats = self.act.unpack(packed)
            state.update(carry=carry, tail=tail, key=key)
            self.ends["episodes"] += int(stats.episodes)
            self.ends["length_sum"] += int(stats.length_sum)
            return self.steps_per_call

        return _timed(seconds, step)

    def episode_length(self) -> float:
        return self.ends["length_sum"] / max(self.ends["episodes"], 1)

    def close(self) -> None:
        self.act.close()


def _best(entry: dict, name: str, rate: Rate) -> None:
    """entry[name]: the best steps/s of the slices; entry[name with cpu_us_per_step]:
    the least CPU per env step."""
    entry[name] = max(entry.get(name, 0.0), rate.steps_per_s)
    cpu = name.replace("steps_per_s", "cpu_us_per_step")
    entry[cpu] = min(entry.get(cpu, float("inf")), rate.cpu_us_per_step)


# The longest slice: on a machine shared with other jobs, `make bench`'s 1 s slices let
# one figure draw a quiet moment the other never sees; quarter-second turns meet the
# same quiet moments.
SLICE_S = 0.25


def measure(algos=("dqn", "ppo"), num_envs=16, window=3.0, slices=6, processes=(1, 2, 4)) -> dict:
    """{'random': {...}, algo: {...}, 'vector': {...}, 'together': {...}}: env steps/s,
    B, T, mean episode lengths, cores. Each figure runs `slices` x window / 3 s in all,
    in slices of at most `SLICE_S`, and is the best of them; the figures compared by a
    ratio take turns slice by slice, so that a load that comes and goes reaches each
    alike and the best slices are the quietest moments of both."""
    from distrl.acting import host_rollout  # noqa: PLC0415

    sync, unrolled = host_rollout.synchronous_dispatch(), host_rollout.unrolled_threefry()
    out = {"random": {"env": ENV, "num_envs": num_envs, "steps_per_s": 0.0}}
    out["meta"] = {
        "synchronous_dispatch": sync,
        "unrolled_threefry": unrolled,
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
    }
    total = slices * window / 3  # seconds per figure
    slices = max(slices, round(total / SLICE_S))
    ends, slice_s = {}, total / slices
    out["meta"].update(slice_s=round(slice_s, 3), slices=slices)
    for algo in algos:
        deadline, bare = _actor(algo, num_envs, 60.0), _actor(algo, num_envs, 0.0)
        vector = deadline.act._stepper.vector  # the actor's own vector env, stepped alone
        gym_vector = _gymnasium_vector(num_envs)
        try:
            deadline.rate(1.0), bare.rate(1.0)  # compile
            entry = out.setdefault(algo, {"num_envs": num_envs})
            entry["unroll_length"] = deadline.steps_per_call // num_envs
            for _ in range(slices):
                rate = _random_rate(vector, num_envs, slice_s, ends)
                _best(out["random"], "steps_per_s", rate)
                _best(entry, "actor_steps_per_s", deadline.rate(slice_s))
                _best(entry, "actor_no_deadline_steps_per_s", bare.rate(slice_s))
                rate = _random_rate(gym_vector, num_envs, slice_s)
                _best(out["random"], "gymnasium_steps_per_s", rate)
            entry["episode_length"] = round(deadline.episode_length(), 1)
        finally:
            gym_vector.close()
            deadline.close()
            bare.close()
    out["random"]["episode_length"] = round(ends["steps"] / max(ends["episodes"], 1), 1)
    for entry in [out["random"], *(out[algo] for algo in algos)]:  # env steps per CPU second
        cpu = entry.get("cpu_us_per_step") or entry.get("actor_cpu_us_per_step")
        entry["steps_per_cpu_s"] = 1e6 / cpu
    out["continuous"] = continuous(num_envs, slice_s, slices)
    out["vector"] = sync_against_async(algos[0], slice_s, slices)
    out["together"] = {str(n): together(n, algos[0], num_envs, window) for n in processes}
    return out


def continuous(num_envs: int, slice_s: float, slices: int) -> dict:
    """`CONTINUOUS`'s env alone (its actor's own vector env, random actions in the Box)
    and its actor (`HostAct`, the agent's sampled actions), taking turns slice by slice
    (best of `slices`); {'error': ...} where the env cannot be made (no mujoco)."""
    env_name, algo = CONTINUOUS
    out = {"env": env_name, "algo": algo, "num_envs": num_envs}
    try:
        acting = _actor(algo, num_envs, 60.0, env_name=env_name)
    except Exception as err:  # noqa: BLE001 - a row with the cause, the others still run
        return dict(out, error=f"{type(err).__name__}: {err}".splitlines()[0])
    try:
        acting.rate(1.0)  # compile
        out["unroll_length"] = acting.steps_per_call // num_envs
        vector = acting.act._stepper.vector
        for _ in range(slices):
            _best(out, "random_steps_per_s", _random_rate(vector, num_envs, slice_s))
            _best(out, "actor_steps_per_s", acting.rate(slice_s))
    finally:
        acting.close()
    out["random_steps_per_cpu_s"] = 1e6 / out["random_cpu_us_per_step"]
    out["actor_steps_per_cpu_s"] = 1e6 / out["actor_cpu_us_per_step"]
    return out


def sync_against_async(algo: str, slice_s: float, slices: int, num_envs: int = ASYNC_ENVS):
    """The env alone and `algo`'s actor at B=`num_envs`, with the copies in this
    process and in subprocesses, taking turns slice by slice (best of `slices`)."""
    out = {"algo": algo, "num_envs": num_envs}
    actors = {}
    try:
        for mode in ("sync", "async"):
            actors[mode] = _actor(algo, num_envs, 60.0, mode)
            actors[mode].rate(1.0)  # compile, start the subprocesses
        for _ in range(slices):
            for mode, acting in actors.items():
                vector = acting.act._stepper.vector
                entry = out.setdefault(mode, {})
                _best(entry, "random_steps_per_s", _random_rate(vector, num_envs, slice_s))
                _best(entry, "actor_steps_per_s", acting.rate(slice_s))
    finally:
        for acting in actors.values():
            acting.close()
    return out


def together(n: int, algo: str, num_envs: int, window: float, timeout_s: float = 600.0):
    """`n` actor processes (`python -m benchmarks.host_env --worker`), started, compiled,
    then released at once for `window` seconds: {'steps_per_s': total, 'cores':
    [each process's CPU cores over its window], 'cores_total', 'processes': [...]}."""
    cmd = [sys.executable, "-m", "benchmarks.host_env", "--worker", algo, str(num_envs)]
    root, env = actor_environment()
    procs = [
        subprocess.Popen(
            cmd + [str(window)],
            cwd=root,
            env=env,
            text=True,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        for _ in range(n)
    ]
    try:
        deadline = time.time() + timeout_s
        for proc in procs:  # each says "ready" once compiled
            line = proc.stdout.readline().strip()
            if line != "ready" or time.time() > deadline:
                raise RuntimeError(f"actor process {proc.pid}: {line or 'ended'} (not ready)")
        for proc in procs:
            proc.stdin.write("go\n")
            proc.stdin.flush()
        each = [json.loads(proc.stdout.readline()) for proc in procs]
        for proc in procs:
            proc.wait(timeout=60)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    cores = [round(e["cpu_s"] / e["wall_s"], 2) for e in each]
    rates = [round(e["steps_per_s"]) for e in each]
    return {
        "algo": algo,
        "processes": n,
        "num_envs": num_envs,
        "steps_per_s": sum(rates),
        "cores": cores,
        "cores_total": round(sum(cores), 2),
        "cores_text": " + ".join(f"{c:.2f}" for c in cores),
        "per_process": rates,
        "per_process_text": " + ".join(f"{r / 1000:.1f}k" for r in rates),
    }


def actor_environment():
    """(repo root, the environment of an actor node's process, `nodeenv`'s)."""
    from distrl.program import nodeenv  # noqa: PLC0415

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, **nodeenv.node_envs()["actor"], PYTHONPATH=root)
    return root, dict(env, PYTHONUNBUFFERED="1", **{_AS_ACTOR: "1"})


def run(out_path: str, algos, window: float, processes, timeout_s: float = 900.0) -> dict:
    """`measure` in a process set up as an actor node is; its results (also in
    `out_path`)."""
    root, env = actor_environment()
    cmd = [sys.executable, "-m", "benchmarks.host_env", f"--out={out_path}"]
    cmd += [f"--algos={','.join(algos)}", f"--window={window}"]
    cmd += [f"--processes={','.join(map(str, processes))}"]
    subprocess.run(cmd, cwd=root, env=env, check=True, timeout=timeout_s)
    with open(out_path) as f:
        return json.load(f)


def _worker(algo: str, num_envs: int, window: float) -> None:
    """One of `together`'s actor processes: compile, say "ready", wait for "go", act
    for `window` seconds, print its rate and the CPU time it used (JSON)."""
    from distrl.acting import host_rollout  # noqa: PLC0415

    host_rollout.synchronous_dispatch()
    host_rollout.unrolled_threefry()
    acting = _actor(algo, num_envs, 60.0)
    try:
        acting.rate(1.0)
        print("ready", flush=True)
        sys.stdin.readline()
        before, start = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        rate = acting.rate(window).steps_per_s
        wall, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_SELF)
    finally:
        acting.close()
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    print(json.dumps({"steps_per_s": rate, "cpu_s": cpu, "wall_s": wall}), flush=True)


def main(argv) -> None:
    if argv[:1] == ["--worker"]:
        _worker(argv[1], int(argv[2]), float(argv[3]))
        return
    usage = "usage: host_env.py --out=FILE [--algos=dqn,ppo] [--window=S] [--processes=1,2,4]"
    args = dict(a.removeprefix("--").partition("=")[::2] for a in argv)
    try:
        if set(args) - {"out", "algos", "window", "processes"} or not args.get("out"):
            raise ValueError(argv)
        algos = tuple(args.get("algos", "dqn,ppo").split(","))
        window = float(args.get("window", 3.0))
        processes = tuple(int(n) for n in args.get("processes", "1,2,4").split(","))
    except ValueError:
        print(f"{usage} (not {' '.join(argv)})")
        sys.exit(2)
    if os.environ.get(_AS_ACTOR) != "1":  # measure in a process set up as an actor node
        print(json.dumps(run(args["out"], algos, window, processes), indent=1))
        return
    results = measure(algos, window=window, processes=processes)
    with open(args["out"], "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1:])
