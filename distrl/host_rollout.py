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
default, NEXT_STEP, answers the step after an episode's end with the reset
observation and reward 0 and ignores the action: a step that is no transition, which
a [T, B] chunk has no room for). In SAME_STEP a copy whose episode ended resets
within the same step: the step returns the reset observation (the policy's next
input) and `info["final_obs"]` the observation reached, which becomes the
transition's next_observation, so no transition crosses an episode boundary and a
truncation bootstraps from the state it reached.

Failures: every copy is `pyenv.Checked` (an exception or an observation its space
does not allow becomes one `EnvError` line naming the env, copy and step); a vector
step slower than `timeout_s` is an `EnvError` too (sync: the step runs in a worker
thread that is abandoned; async: gymnasium's `step_wait` timeout).
"""

import queue
import threading

import jax
import numpy as np

from distrl import envs, packing, pyenv
from distrl.pyenv import EnvError
from distrl.rollout import RolloutStats
from distrl.types import Transition

SYNC, ASYNC = "sync", "async"


def make_vector(env, num_envs: int, mode: str = SYNC):
    """`num_envs` checked copies of `env` (a `HostEnv`) in a SAME_STEP vector env."""
    import gymnasium  # noqa: PLC0415 - only envs stepped in Python need it

    makers = [env.maker(i) for i in range(num_envs)]
    same_step = gymnasium.vector.AutoresetMode.SAME_STEP
    if mode == ASYNC:
        return gymnasium.vector.AsyncVectorEnv(
            makers, context=_forkserver(), worker=pyenv.async_worker, autoreset_mode=same_step
        )
    return gymnasium.vector.SyncVectorEnv(makers, autoreset_mode=same_step)


def _forkserver() -> str:
    """The start method of the copies' subprocesses: forked from a server process that
    imported only `distrl.pyenv` (gymnasium, numpy). Not "fork": a fork of a process
    running JAX's threads may deadlock; not "spawn" (nor a forkserver preloading
    `__main__`, its default): the child would import the parent's main module, the
    launcher, which starts a program of its own."""
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


class VectorStepper:
    """A vector env of `num_envs` copies of `env`, stepped and reset under a deadline;
    observations come back as the agent takes them (`HostEnv.encode`)."""

    def __init__(self, env, num_envs: int, mode: str = SYNC, timeout_s: float = 0.0):
        self.env, self.num_envs, self._mode, self._timeout = env, num_envs, mode, timeout_s
        self._vector = make_vector(env, num_envs, mode)
        self._worker = _Worker() if timeout_s > 0 and mode == SYNC else None
        self.steps = 0  # vector steps taken

    def _late(self, what: str):
        return EnvError(
            f"env {self.env.name}: {what} {self.steps} of its {self.num_envs} copies took "
            f"longer than {self._timeout:g} s (config.env.step_timeout_s)"
        )

    def _run(self, what: str, fn, *args):
        if self._worker is None:
            return fn(*args)
        try:
            return self._worker.call(self._timeout, fn, *args)
        except TimeoutError:
            raise self._late(what) from None

    def reset(self, seed: int) -> np.ndarray:
        obs, _ = self._run("reset at vector step", lambda: self._vector.reset(seed=seed))
        return self.env.encode(obs)

    def step(self, actions: np.ndarray):
        """(observation [B] to act on next, reward, terminated, truncated, observation
        reached [B]: the pre-reset one where an episode ended)."""
        self.steps += 1
        actions = np.asarray(actions) + self.env.action_start
        if self._mode == ASYNC:
            self._vector.step_async(actions)
            try:
                out = self._vector.step_wait(timeout=self._timeout or None)
            except Exception as err:  # noqa: BLE001 - multiprocessing.TimeoutError and EnvError
                if type(err).__name__ == "TimeoutError":
                    raise self._late("vector step") from None
                raise
        else:
            out = self._run("vector step", self._vector.step, actions)
        raw, reward, terminated, truncated, info = out
        obs = self.env.encode(raw)
        reached = obs
        done = np.asarray(terminated) | np.asarray(truncated)
        if done.any():
            reached = obs.copy()
            for i in np.flatnonzero(done):
                reached[i] = self.env.encode(np.asarray(info["final_obs"][i])[None])[0]
        return obs, np.asarray(reward, np.float32), np.asarray(terminated, bool), done, reached

    def close(self) -> None:
        self._vector.close(terminate=True) if self._mode == ASYNC else self._vector.close()


class HostCarry:
    """What continues between chunks: the next observation [B] and the running episodes."""

    def __init__(self, observation: np.ndarray):
        b = observation.shape[0]
        self.observation = observation
        self.episode_return = np.zeros(b, np.float32)
        self.episode_length = np.zeros(b, np.int32)


class HostAct:
    """`make_act`'s contract for an env stepped in Python (see the module docstring)."""

    def __init__(self, stepper: VectorStepper, policy, num_steps: int, to_items):
        self._stepper, self._num_steps = stepper, num_steps
        # actions and extras leave the device as one buffer: a copy per leaf cost more
        # step t's key is folded in inside the jit (no per-step slicing dispatch)
        self._policy = packing.PackedFn(
            lambda params, key, t, obs, eps: (
                None,
                policy(params, jax.random.fold_in(key, t), obs, eps),
            )
        )
        self._success = envs.success_signal(stepper.env)

        def items(tail, chunk, stats):
            items, tail = to_items(tail, chunk)
            return tail, (items, stats)

        self._items = packing.PackedFn(items)
        self.unpack = self._items.unpack

    def init_carry(self, seed: int) -> HostCarry:
        return HostCarry(self._stepper.reset(seed))

    def __call__(self, params, carry: HostCarry, key, epsilon, tail):
        chunk, stats = self.unroll(params, carry, key, epsilon)
        tail, packed = self._items(tail, chunk, stats)
        return (carry, tail), packed

    def unroll(self, params, carry: HostCarry, key, epsilon):
        """T steps of the B copies from `carry` (updated in place) -> (Transition [T, B]
        as numpy, RolloutStats)."""
        steps, episodes, return_sum, length_sum, successes = [], 0, 0.0, 0, 0
        for t in range(self._num_steps):
            _, packed = self._policy(params, key, np.int32(t), carry.observation, epsilon)
            actions, extras = self._policy.unpack(packed)
            obs, reward, terminated, last, reached = self._stepper.step(actions)
            steps.append(
                Transition(
                    observation=carry.observation,
                    action=actions,
                    reward=reward,
                    discount=np.where(terminated, 0.0, 1.0).astype(np.float32),
                    last=last,
                    next_observation=reached,
                    extras=extras,
                )
            )
            carry.episode_return += reward
            carry.episode_length += 1
            if last.any():
                episodes += int(last.sum())
                return_sum += float(carry.episode_return[last].sum())
                length_sum += int(carry.episode_length[last].sum())
                if self._success is not None:
                    ts = envs.TimeStep(reached, reward, steps[-1].discount, last)
                    successes += int(np.sum(self._success(ts)))
                carry.episode_return[last], carry.episode_length[last] = 0.0, 0
            carry.observation = obs
        chunk = jax.tree.map(lambda *xs: np.stack(xs), *steps)
        stats = RolloutStats(
            env_steps=np.int32(self._num_steps * self._stepper.num_envs),
            episodes=np.int32(episodes),
            return_sum=np.float32(return_sum),
            length_sum=np.int32(length_sum),
            successes=np.int32(successes),
        )
        return chunk, stats

    def close(self) -> None:
        self._stepper.close()


def make_act(env, policy, config, to_items) -> HostAct:
    """An actor's `HostAct`: config.actor.num_envs copies of `env`, stepped as
    config.env says (vector, step_timeout_s), T = config.actor.unroll_length."""
    stepper = VectorStepper(
        env, config.actor.num_envs, config.env.vector, config.env.step_timeout_s
    )
    return HostAct(stepper, policy, config.actor.unroll_length, to_items)


def seed_of(key) -> int:
    """A gymnasium reset seed (0 .. 2**31-1) from a JAX key."""
    return int(jax.random.randint(key, (), 0, 2**31 - 1))
