"""Stage 4 for an env stepped in Python: B copies in a gymnasium vector env, T steps per
chunk, one jitted batched policy call per step, the chunk turned into the pipeline's
items by the same jitted item function the JAX actor uses.

`HostAct` keeps `nodes.actor.make_act`'s contract, `act(params, carry, key, epsilon,
tail) -> ((carry, tail), packed)` and `act.unpack(packed) -> (items, stats)`, so the
actor node writes the same items into the same Reverb tables whichever kind of env
it steps. The chunk is the JAX rollout's: `Transition` [T, B] (observation, action,
reward, discount 0 only on termination, last on termination or truncation,
next_observation before any reset, policy extras) and `rollout.RolloutStats`.

Episode ends: the vector env runs in gymnasium's SAME_STEP autoreset mode (the
default, NEXT_STEP, answers the step after an episode's end with a step that is no
transition, which a [T, B] chunk has no room for). A copy whose episode ended resets
within the same step: the step returns the reset observation (the policy's next
input) and `info["final_obs"]` the observation reached, the transition's
next_observation, so a truncation bootstraps from the state it reached.

Failures: every copy is `pyenv.Checked` (an exception or an observation its space
does not allow becomes one `EnvError` line naming the env, copy and step); a vector
step slower than `timeout_s` is an `EnvError` too (sync: the step runs in a worker
thread that is abandoned; async: gymnasium's `step_wait` timeout).
"""

import _signal
import contextlib
import functools
import importlib
import os
import queue
import signal
import sys
import threading
import time
import types

import jax
import numpy as np

from distrl import envs, packing, pyenv
from distrl.acting.rollout import RolloutStats
from distrl.pyenv import EnvError
from distrl.types import Transition

SYNC, ASYNC = "sync", "async"


def make_vector(env, num_envs: int, mode: str = SYNC):
    """`num_envs` checked copies of `env` (a `HostEnv`) in a SAME_STEP vector env. Its
    observations are its own buffer, overwritten by the next step (copy=False):
    `VectorStepper` encodes them into arrays of its own at once."""
    import gymnasium  # noqa: PLC0415 - only envs stepped in Python need it

    makers = [env.maker(i) for i in range(num_envs)]
    same_step = gymnasium.vector.AutoresetMode.SAME_STEP
    if mode == ASYNC:
        with _bare_main():
            return gymnasium.vector.AsyncVectorEnv(
                makers,
                context=_forkserver(),
                worker=functools.partial(pyenv.async_worker, os.getpid()),
                autoreset_mode=same_step,
                copy=False,
            )
    return gymnasium.vector.SyncVectorEnv(makers, copy=False, autoreset_mode=same_step)


@contextlib.contextmanager
def _bare_main():
    """Copies started meanwhile do not import this process's main module: multiprocessing
    names it in each child's start data, and the child runs it (the trainer, a node's
    entry: JAX and all, 450 MB a copy seen). A copy needs only `distrl.pyenv` and the
    env's own module, which it imports by name."""
    main = sys.modules["__main__"]
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        sys.modules["__main__"] = main


def _forkserver() -> str:
    """The start method of the copies' subprocesses: forked from a server process that
    imported only `distrl.pyenv` (gymnasium, numpy). Not "fork": a fork of a process
    running JAX's threads may deadlock; not "spawn": each copy would import gymnasium
    and the env anew."""
    import multiprocessing  # noqa: PLC0415

    _short_socket_dir()
    multiprocessing.set_forkserver_preload(["distrl.pyenv"])
    return "forkserver"


# A unix socket's path must fit 107 bytes; multiprocessing adds about 35 to its temp dir.
_SOCKET_DIR_MAX = 64


def _short_socket_dir() -> None:
    """The forkserver listens on a unix socket in multiprocessing's temp dir, made under
    TMPDIR, which for a node lies inside the run directory and may be deep ("AF_UNIX
    path too long"). Past the margin, that dir is made (and cached, removed at exit)
    under /tmp instead."""
    import multiprocessing.util  # noqa: PLC0415
    import tempfile  # noqa: PLC0415

    if len(tempfile.gettempdir()) <= _SOCKET_DIR_MAX:
        return
    saved, tempfile.tempdir = tempfile.tempdir, "/tmp"
    try:
        multiprocessing.util.get_temp_dir()
    finally:
        tempfile.tempdir = saved


class _Worker:
    """One daemon thread that runs calls with a deadline: a call past it raises
    `TimeoutError` and the thread is left to its hung call (the node then fails)."""

    def __init__(self):
        self._calls, self._answers = queue.Queue(), queue.Queue()
        threading.Thread(target=self._loop, daemon=True, name="env stepper").start()

    def _loop(self):
        while True:
            fn, args = self._calls.get()
            try:
                self._answers.put((True, fn(*args)))
            except BaseException as err:  # noqa: BLE001 - handed to the caller
                self._answers.put((False, err))

    def call(self, timeout_s: float, fn, *args):
        self._calls.put((fn, args))
        try:
            ok, value = self._answers.get(timeout=timeout_s)
        except queue.Empty:
            raise TimeoutError from None
        if not ok:
            raise value
        return value


class _Late(BaseException):
    """Raised inside a call past its deadline by the SIGUSR2 handler (a BaseException,
    so an env's own `except Exception` does not swallow it)."""


_LATE_SIGNAL = signal.SIGUSR2  # Launchpad's nodes own SIGALRM (its stop), SIGUSR1 dumps stacks


class _Deadline:
    """Runs calls with a deadline of `timeout_s`: a call past it raises `TimeoutError`.

    In the main thread (where actors and the evaluator step their envs) the call runs
    in place and costs two attribute writes: a watchdog thread, waking every tenth of
    the deadline (at most every second), sees a call running past it and sends the
    main thread SIGUSR2, whose handler raises `_Late` inside the hung env (its Python
    code, or an interruptible wait such as a sleep or a socket read), and nothing is
    left running. An env hung in native code that lets no signal through is not
    interrupted: copies in subprocesses (`env.vector=async`) are, always. Elsewhere,
    or where another handler owns SIGUSR2, the call runs in a `_Worker` thread that
    is abandoned to a hung call (a thread hand-off per call, a large share of a small
    env's step on a loaded machine)."""

    current = None  # the main thread's call in progress: (its _Deadline, its start)

    def __init__(self, timeout_s: float):
        self._timeout = timeout_s
        self._worker = self._closed = None

    def call(self, fn, *args):
        if threading.current_thread() is threading.main_thread() and _late_handler_ours():
            return self._watched(fn, args)
        if self._worker is None:
            self._worker = _Worker()
        return self._worker.call(self._timeout, fn, *args)

    def _watched(self, fn, args):
        if self._closed is None:
            self._closed = threading.Event()
            threading.Thread(target=self._watch, daemon=True, name="env watchdog").start()
        try:
            _Deadline.current = (self, time.monotonic())
            try:
                return fn(*args)
            finally:
                _Deadline.current = None
        except _Late:
            raise TimeoutError from None

    def _watch(self):
        main = threading.main_thread().ident
        while not self._closed.wait(min(self._timeout / 10, 1.0)):
            current = _Deadline.current
            mine = current is not None and current[0] is self
            if mine and time.monotonic() - current[1] > self._timeout:
                signal.pthread_kill(main, _LATE_SIGNAL)
                self._closed.wait(self._timeout)  # one signal per late call

    def close(self) -> None:
        if self._closed is not None:
            self._closed.set()


def _on_late(signum, frame):
    current = _Deadline.current
    if current is not None and time.monotonic() - current[1] > current[0]._timeout:
        raise _Late  # a signal that lands after the call ended is ignored


def _late_handler_ours() -> bool:
    """True when SIGUSR2 is handled by `_on_late` (installed here unless another
    handler holds it); main thread only. Asked of `_signal`: `signal.getsignal` maps
    the answer to its enum by raising and catching a ValueError for a function, a cost
    paid in every vector step."""
    handler = _signal.getsignal(_LATE_SIGNAL)
    if handler is _on_late:
        return True
    if handler != signal.SIG_DFL:
        return False
    signal.signal(_LATE_SIGNAL, _on_late)
    return True


class VectorStepper:
    """A vector env of `num_envs` copies of `env`, stepped and reset under a deadline;
    observations come back as the agent takes them (`HostEnv.encode`). `vector` is
    the gymnasium vector env itself (what the benchmark steps alone)."""

    def __init__(self, env, num_envs: int, mode: str = SYNC, timeout_s: float = 0.0):
        self.env, self.num_envs, self._mode, self._timeout = env, num_envs, mode, timeout_s
        self.vector = make_vector(env, num_envs, mode)
        self._deadline = _Deadline(timeout_s) if timeout_s > 0 and mode == SYNC else None
        self._actions = env.action_buffer(num_envs)
        self.steps = 0  # vector steps taken

    def _late(self, what: str):
        return EnvError(
            f"env {self.env.name}: {what} {self.steps} of its {self.num_envs} copies took "
            f"longer than {self._timeout:g} s (config.env.step_timeout_s)"
        )

    def _run(self, what: str, fn, *args):
        if self._deadline is None:
            return fn(*args)
        try:
            return self._deadline.call(fn, *args)
        except TimeoutError:
            raise self._late(what) from None

    def buffer(self, *lead) -> np.ndarray:
        """An empty array [*lead, B, *observation shape] of observations as encoded."""
        spec = self.env.spec
        return np.empty((*lead, self.num_envs, *spec.observation_shape), spec.observation_dtype)

    def reset(self, seed: int) -> np.ndarray:
        obs, _ = self._run("reset at vector step", lambda: self.vector.reset(seed=seed))
        return self.env.encode(obs)

    def step(self, actions: np.ndarray):
        """(observation [B] to act on next, reward, terminated, truncated, observation
        reached [B]: the pre-reset one where an episode ended)."""
        obs, reached, last = self.buffer(), self.buffer(), np.empty(self.num_envs, bool)
        reward, terminated = self.step_into(actions, obs, reached, last)
        return obs, reward.astype(np.float32), terminated.copy(), last, reached

    def step_into(self, actions: np.ndarray, obs: np.ndarray, reached: np.ndarray, last):
        """One vector step of `actions` [B] (as the agent numbers them): the observation
        to act on next written into `obs` [B, ...], the observation reached (pre-reset
        where an episode ended) into `reached`, whether an episode ended there
        (terminated or truncated) into `last` [B]; returns the vector env's (reward,
        terminated) arrays [B]."""
        self.steps += 1
        # in a buffer of the stepper's: the vector env reads them within the step
        wide = self._actions
        self.env.env_actions_into(actions, wide)
        if self._mode == ASYNC:
            self.vector.step_async(wide)
            try:
                out = self.vector.step_wait(timeout=self._timeout or None)
            except Exception as err:  # noqa: BLE001 - multiprocessing.TimeoutError and EnvError
                if type(err).__name__ == "TimeoutError":
                    raise self._late("vector step") from None
                raise
        else:
            out = self._run("vector step", self.vector.step, wide)
        raw, reward, terminated, truncated, info = out
        self.env.encode_into(raw, obs)
        reached[...] = obs
        np.logical_or(terminated, truncated, out=last)
        if last.any():  # reset within the step: the observation reached is the final one
            for i in np.flatnonzero(last):
                self.env.encode_into(np.asarray(info["final_obs"][i])[None], reached[i : i + 1])
        return reward, terminated

    def close(self) -> None:
        if self._deadline is not None:
            self._deadline.close()
        self.vector.close(terminate=True) if self._mode == ASYNC else self.vector.close()


class HostCarry:
    """What continues between chunks: the next observation [B] and the running episodes."""

    def __init__(self, observation: np.ndarray):
        b = observation.shape[0]
        self.observation = observation
        self.episode_return = np.zeros(b, np.float32)
        self.episode_length = np.zeros(b, np.int32)


class HostAct:
    """`make_act`'s contract for an env stepped in Python (see the module docstring).

    Per step the loop does only what must happen per step: one jitted policy call
    whose output (actions and extras) comes off the device as one buffer, written
    into row t of the chunk's [T, words] buffer, and one vector step whose
    observations are written into rows of the chunk's [T + 1, B] buffer. The
    chunk's other fields and its episode statistics are computed once per chunk on
    the [T, B] arrays. The call's arguments cost least as the params' leaves in a
    tuple (flattened once per chunk, not a nested dict per step) and the step index
    as device scalars (put once per actor, not a numpy scalar converted per call).
    An item function that needs no JAX (`packing.OnHost`: the chunk itself) runs in
    place on the numpy chunk; any other is jitted with one packed copy back."""

    def __init__(self, stepper: VectorStepper, policy, num_steps: int, to_items):
        self._stepper, self._num_steps = stepper, num_steps
        self._raw_policy = policy
        self._treedef = self._policy = self._layout = None  # bound by the first unroll
        self._steps = None  # the step indices 0 .. T-1 as device scalars
        self._success = envs.success_signal(stepper.env)

        def items(tail, chunk, stats):
            items, tail = to_items(tail, chunk)
            return tail, (items, stats)

        if isinstance(to_items, packing.OnHost):
            self._items, self.unpack = items, _as_is
        else:
            self._items = packing.PackedFn(items)
            self.unpack = self._items.unpack

    def _bind(self, treedef, params, key, observation, epsilon) -> None:
        """The per-step call for params of structure `treedef`, and its output's layout."""
        policy = self._raw_policy
        # step t's key is folded in inside the jit (no per-step slicing dispatch)
        self._policy = jax.jit(
            lambda leaves, key, t, obs, eps: packing.pack(
                policy(jax.tree.unflatten(treedef, leaves), jax.random.fold_in(key, t), obs, eps)
            )
        )
        self._layout = packing.Layout(jax.eval_shape(policy, params, key, observation, epsilon))
        self._treedef = treedef
        if self._steps is None:
            self._steps = [jax.device_put(np.int32(t)) for t in range(self._num_steps)]

    def init_carry(self, seed: int) -> HostCarry:
        return HostCarry(self._stepper.reset(seed))

    def __call__(self, params, carry: HostCarry, key, epsilon, tail):
        chunk, stats = self.unroll(params, carry, key, epsilon)
        tail, packed = self._items(tail, chunk, stats)
        return (carry, tail), packed

    def unroll(self, params, carry: HostCarry, key, epsilon):
        """T steps of the B copies from `carry` (updated in place) -> (Transition [T, B]
        as numpy, RolloutStats)."""
        stepper, num_steps = self._stepper, self._num_steps
        leaves, treedef = jax.tree.flatten(params)
        if self._treedef is None or treedef != self._treedef:
            self._bind(treedef, params, key, carry.observation, epsilon)
        # epsilon converted in each call (cheap): a device scalar is costly to make, and
        # a DQN actor's changes every chunk while its schedule decays
        leaves, epsilon = tuple(leaves), np.float32(epsilon)
        policy, layout, steps = self._policy, self._layout, self._steps
        b = stepper.num_envs
        obs, reached = stepper.buffer(num_steps + 1), stepper.buffer(num_steps)
        words = np.empty((num_steps, layout.words), np.uint32)
        actions = layout.leaf(words, 0)  # a view [T, B] of the actions in `words`
        reward = np.empty((num_steps, b), np.float32)
        terminated, last = np.empty((num_steps, b), bool), np.empty((num_steps, b), bool)
        obs[0] = carry.observation
        for t in range(num_steps):
            words[t] = policy(leaves, key, steps[t], obs[t], epsilon)
            reward[t], terminated[t] = stepper.step_into(
                actions[t], obs[t + 1], reached[t], last[t]
            )
        # contiguous: the packed path's leaves are, and a Reverb writer takes them as is
        actions, extras = jax.tree.map(np.ascontiguousarray, layout.unpack(words))
        discount = np.where(terminated, 0.0, 1.0).astype(np.float32)
        chunk = Transition(obs[:num_steps], actions, reward, discount, last, reached, extras)
        carry.observation = obs[num_steps]
        successes = 0
        if self._success is not None:
            successes = int(np.sum(self._success(envs.TimeStep(reached, reward, discount, last))))
        episodes, return_sum, length_sum = _episodes(carry, reward, last)
        stats = RolloutStats(
            env_steps=np.int32(num_steps * b),
            episodes=np.int32(episodes),
            return_sum=np.float32(return_sum),
            length_sum=np.int32(length_sum),
            successes=np.int32(successes),
            first_nonfinite_action=np.int32(-1),  # each copy's `pyenv.Checked` refuses one
        )
        return chunk, stats

    def close(self) -> None:
        self._stepper.close()


def _as_is(output):
    """`unpack` where the item function ran in place: its output is already numpy."""
    return output


def _episodes(carry: HostCarry, reward: np.ndarray, last: np.ndarray):
    """(episodes ended, their returns' sum, their lengths' sum) in a chunk's `reward`
    and `last` [T, B] after `carry`'s running episodes; `carry`'s running return and
    length then follow the chunk. Per copy, the returns of the episodes that ended
    sum to its running return at its last end (each episode's is the difference
    between consecutive ends), so this needs no loop over steps."""
    num_steps = reward.shape[0]
    running = carry.episode_return.astype(np.float64) + np.cumsum(reward, 0, np.float64)
    length = carry.episode_length[None] + np.arange(1, num_steps + 1)[:, None]
    ended = last.any(0)
    at = num_steps - 1 - np.argmax(last[::-1], 0)  # each copy's last end (if any)
    copies = np.arange(reward.shape[1])
    end_return = np.where(ended, running[at, copies], 0.0)
    end_length = np.where(ended, length[at, copies], 0)
    carry.episode_return = (running[-1] - end_return).astype(np.float32)
    carry.episode_length = (length[-1] - end_length).astype(np.int32)
    return int(last.sum()), float(end_return.sum()), int(end_length.sum())


def make_act(env, policy, config, to_items) -> HostAct:
    """An actor's `HostAct`: config.actor.num_envs copies of `env`, stepped as
    config.env says (vector, step_timeout_s), T = config.actor.unroll_length."""
    stepper = VectorStepper(
        env, config.actor.num_envs, config.env.vector, config.env.step_timeout_s
    )
    return HostAct(stepper, policy, config.actor.unroll_length, to_items)


def synchronous_dispatch() -> bool:
    """Makes this process's JAX CPU client run each jitted call in the calling thread,
    when no backend exists yet (the flag is read when the client is made); True when
    calls are synchronous. A host-stepped actor makes one small call per env step,
    quicker run in place than handed to XLA's thread and waited for, far more so on a
    loaded machine (docs/decisions.md, "Envs stepped in Python step in the actors, in
    gymnasium's SAME_STEP autoreset mode"). An actor of a JAX env keeps asynchronous
    dispatch: its rollout computes while it writes the previous one."""
    from jax._src import xla_bridge  # noqa: PLC0415 - the one way to ask, without making one

    if not xla_bridge.backends_are_initialized():
        jax.config.update("jax_cpu_enable_async_dispatch", False)
    return not jax.config.read("jax_cpu_enable_async_dispatch")


def unrolled_threefry(on: bool = True) -> bool:
    """Makes this process lower JAX's threefry hash (every `jax.random` draw) on the CPU
    as straight-line code (`on`) or as JAX's CPU default, a rolled 5-step while loop
    (`on=False`); True when the straight-line lowering is in place. The same bits
    either way; only functions compiled after the call follow it.

    Why, for a host-stepped actor (call before its policy compiles): the rolled
    loop makes about 8 small independent thunks (key halves, loop-state copies) that
    XLA:CPU's thunk executor can run at once, and past a threshold of ready thunks
    (PPO's policy, with its two torsos' first matmuls, passes it; DQN's does not) it
    hands half of them to its intra-op thread pool and waits for them: two more threads
    per step, and slower, far more so on a loaded machine where the waited-for thread
    waits for a core. Straight-line, the draw fuses into its consumers and the call
    runs in the calling thread (docs/decisions.md, "Envs stepped in Python step in the
    actors, in gymnasium's SAME_STEP autoreset mode")."""
    try:  # JAX internals: a JAX without them keeps its default (the bits are the same)
        from jax._src.interpreters import mlir  # noqa: PLC0415

        rules = _threefry_rules()
        rule = rules._threefry2x32_lowering_rule if on else rules._threefry2x32_cpu_lowering_rule
        mlir.register_lowering(rules.threefry2x32_p, rule, platform="cpu")
    except (ImportError, AttributeError):
        return False
    return on


# Where JAX keeps threefry's primitive and lowering rules: a module of their own in jax
# 0.11 (requirements-core.lock), jax._src.prng in 0.6 (requirements.lock).
_THREEFRY_MODULES = ("jax._src.random.threefry2x32", "jax._src.prng")


def _threefry_rules():
    """The JAX module holding `threefry2x32_p` and its lowering rules (ImportError when
    none of `_THREEFRY_MODULES` is there)."""
    for name in _THREEFRY_MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        if hasattr(module, "threefry2x32_p"):
            return module
    raise ImportError(f"none of {_THREEFRY_MODULES} holds threefry2x32_p")


def seed_of(key) -> int:
    """A gymnasium reset seed (0 .. 2**31-1) from a JAX key."""
    return int(jax.random.randint(key, (), 0, 2**31 - 1))
