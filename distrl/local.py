"""The single-process trainer: the reference the distributed system is compared to.

It uses exactly the agents' `update` and `policy` and the shared rollout: B envs
for T steps per iteration, then (DQN) add n-step transitions to a circular replay
buffer held in JAX arrays (`distrl.agents.replay_buffer`) and take a few updates,
or (AC/PPO) update on the chunk itself. Iterations, updates and the greedy evaluation
that decides when to stop are fused into ONE jitted call (a `lax.while_loop` that runs up to
`iterations_per_call` iterations); Python only loops over those calls and logs.
The run is solved when the greedy success interval's lower bound reaches the
target in an evaluation of `confirm_envs` episodes, run whenever the greedy
policy's exact success (a cheap dynamic programme in the loop) reaches it;
the final figures are a `confirm_envs`-episode evaluation and the exact success
of the greedy policy against the optimum's (`envs.exact`).

    python -m distrl.local --algo ppo          # prints env steps, time, grids
"""

import argparse
import dataclasses
import functools
import threading
import time
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from distrl import agents, evaluation, rollout
from distrl.agents import nstep
from distrl.agents.replay_buffer import ReplayBuffer, replay_add, replay_init, replay_sample
from distrl.envs import exact, make_env
from distrl.types import QTransition, Transition

# Presets whose advantages need whole episodes inside a chunk: default T for them.
LONG_CHUNKS = {"grpo": 64, "reinforce": 64}


@dataclasses.dataclass(frozen=True)
class LocalConfig:
    """Trainer settings (the agent's own settings live in its config dataclass)."""

    algo: str = "dqn"  # a preset of distrl.agents.PRESETS
    map_name: str = "4x4"
    slippery: bool = False
    num_envs: int = 16  # B
    rollout_length: int = 0  # T; 0: LONG_CHUNKS for the preset, else 16
    max_env_steps: int = 200_000  # budget
    target_success: float = 1.0  # stop once the success interval's lower bound reaches this
    # > 0: the target is this fraction of the exact optimal success (envs.exact's pi*)
    target_of_optimal: float = 0.0
    eval_every: int = 1  # iterations between greedy evaluations
    eval_envs: int = 100  # episodes per evaluation (1 on a deterministic map: exact)
    confirm_envs: int = 10_000  # episodes instead, once the exact success reaches the target
    iterations_per_call: int = 200  # iterations per jitted call (logs in between)
    seed: int = 0
    # XLA backend optimisation level for the compiled step; -1: XLA's default (2).
    # 0 halves compile time, which dominates on small maps, but steps run ~3x slower:
    # use -1 for long runs and throughput comparisons.
    xla_opt_level: int = 0
    # DQN only:
    replay_capacity: int = 10_000
    batch_size: int = 64
    min_replay_size: int = 256
    updates_per_iteration: int = 4


class TrainCarry(NamedTuple):
    """Everything the fused training loop carries between iterations."""

    state: agents.TrainingState
    rollout: rollout.RolloutCarry
    replay: ReplayBuffer | None  # DQN only
    tail: Transition | None  # DQN n > 1: last n - 1 steps of the previous chunk
    env_steps: jnp.ndarray  # int32 []
    iterations: jnp.ndarray  # int32 []
    episodes: jnp.ndarray  # int32 [], completed while training
    evaluation: evaluation.EvalResult  # latest greedy evaluation


class TrainResult(NamedTuple):
    """What `train` reports (host values)."""

    solved: bool
    env_steps: int
    updates: int
    iterations: int
    episodes: int
    wall_time: float  # seconds, including compilation
    compile_time: float  # seconds spent tracing and compiling (init and fused step)
    success_rate: float  # the final evaluation: confirm_envs episodes (1 if deterministic)
    mean_return: float
    mean_length: float
    params: Any
    report: str  # value and arrow grids
    success_low: float = 0.0  # its 95% Wilson interval
    success_high: float = 0.0
    eval_episodes: int = 0
    target: float = 0.0  # the success the run had to confirm
    exact: dict | None = None  # evaluation.exact_answer of the final greedy policy
    history: tuple = ()  # (env steps, seconds, exact success) after each jitted call


def _flatten_tb(tree):
    """[T, B, ...] -> [T * B, ...]."""
    return jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:]), tree)


def _dqn_updates(agent, cfg: LocalConfig, state, replay: ReplayBuffer, key):
    """`updates_per_iteration` updates on replay samples, once it holds enough."""

    def one(s, k):
        batch = replay_sample(replay, k, cfg.batch_size)
        ready = replay.size >= cfg.min_replay_size
        return jax.lax.cond(ready, lambda s_: agent.update(s_, batch)[0], lambda s_: s_, s), None

    state, _ = jax.lax.scan(one, state, jax.random.split(key, cfg.updates_per_iteration))
    return state


def _iteration(env, agent, cfg: LocalConfig, c: TrainCarry, key) -> TrainCarry:
    """One rollout of T x B steps, then the agent's update(s)."""
    roll_key, update_key = jax.random.split(key)
    eps = agent.epsilon(c.env_steps)
    rc, traj, stats = rollout.unroll(
        env, agent.policy, cfg.rollout_length, c.state.params, c.rollout, roll_key, eps
    )
    replay, tail = c.replay, c.tail
    if agent.batch_kind == "transitions":
        n, gamma = agent.config.n_step, agent.config.discount
        full = traj if tail is None else nstep.concat_tail(tail, traj)
        tail = None if tail is None else nstep.tail(full, n)
        replay = replay_add(replay, _flatten_tb(nstep.n_step_transitions(full, n, gamma)))
        state = _dqn_updates(agent, cfg, c.state, replay, update_key)
    else:
        state, _ = agent.update(c.state, traj)
    return c._replace(
        state=state,
        rollout=rc,
        replay=replay,
        tail=tail,
        env_steps=c.env_steps + stats.env_steps,
        iterations=c.iterations + 1,
        episodes=c.episodes + stats.episodes,
    )


def _evaluate(env, agent, cfg: LocalConfig, target: float, params, key):
    """The greedy evaluation: eval_envs episodes, or confirm_envs episodes once the greedy
    policy's exact success (`exact.make_policy_stats`, cheap) reaches the target."""
    act = evaluation.make_act(agent, greedy=True)
    if evaluation.is_deterministic(env):  # one episode is exact
        return evaluation.run_episodes(env, act, params, key, 1, exact=True)
    screen_key, confirm_key = jax.random.split(key)
    actions = agent.greedy(params, jnp.eye(env.num_cells, dtype=jnp.float32))
    success, _, _ = exact.make_policy_stats(env)(actions)
    return jax.lax.cond(
        success >= target,
        lambda: evaluation.run_episodes(env, act, params, confirm_key, cfg.confirm_envs),
        lambda: evaluation.run_episodes(env, act, params, screen_key, cfg.eval_envs),
    )


def _train_call(env, agent, cfg: LocalConfig, target: float, carry: TrainCarry, key):
    """Up to `iterations_per_call` iterations; stops early on budget or confirmed success.

    Returns (carry, (values [O], greedy actions [O])) - the grids ride along so that
    the report needs no extra compile.
    """
    stop_at = carry.iterations + cfg.iterations_per_call

    def running(c):
        solved = evaluation.confirmed(c.evaluation, target, cfg.confirm_envs)
        return (c.iterations < stop_at) & (c.env_steps < cfg.max_env_steps) & ~solved

    def body(c):
        it_key, eval_key = jax.random.split(jax.random.fold_in(key, c.iterations))
        c = _iteration(env, agent, cfg, c, it_key)
        due = c.iterations % cfg.eval_every == 0
        return jax.lax.cond(
            due,
            lambda c_: c_._replace(
                evaluation=_evaluate(env, agent, cfg, target, c_.state.params, eval_key)
            ),
            lambda c_: c_,
            c,
        )

    carry = jax.lax.while_loop(running, body, carry)
    return carry, evaluation.cell_values(agent, carry.state.params, env.num_cells)


def init_carry(env, agent, cfg: LocalConfig, key) -> TrainCarry:
    """Initial agent state, envs, replay buffer and (n-step) tail. Jittable."""
    agent_key, env_key, warm_key = jax.random.split(key, 3)
    state = agent.init(agent_key)
    rc = rollout.init_carry(env, env_key, cfg.num_envs)
    replay, tail, env_steps = None, None, 0
    if agent.batch_kind == "transitions":
        n = agent.config.n_step
        if n > 1:  # n - 1 warm-up steps so that every later step starts one window
            rc, tail, _ = rollout.unroll(
                env, agent.policy, n - 1, state.params, rc, warm_key, agent.epsilon(0)
            )
            env_steps = (n - 1) * cfg.num_envs
        obs0 = jnp.zeros((env.obs_size,), jnp.float32)
        example = QTransition(obs0, jnp.int32(0), jnp.float32(0), jnp.float32(0), obs0)
        replay = replay_init(example, cfg.replay_capacity)
    zero = jnp.zeros((), jnp.float32)
    return TrainCarry(
        state,
        rc,
        replay,
        tail,
        jnp.int32(env_steps),
        jnp.int32(0),
        jnp.int32(0),
        evaluation.EvalResult(zero, zero, zero, zero, zero, zero),
    )


def _compile(init_fn, call_fn, init_key, key, opt_level):
    """Compiles the init and the fused step concurrently (XLA releases the GIL)."""
    options = None if opt_level < 0 else {"xla_backend_optimization_level": opt_level}
    init_lowered = jax.jit(init_fn).lower(init_key)
    call_lowered = jax.jit(call_fn).lower(init_lowered.out_info, key)
    compiled = {}
    worker = threading.Thread(target=lambda: compiled.update(init=init_lowered.compile(options)))
    worker.start()
    call_compiled = call_lowered.compile(options)
    worker.join()
    return compiled["init"], call_compiled


def _loop(step, carry: TrainCarry, key, cfg: LocalConfig, target, log, start: float, judge):
    """Calls the compiled step until solved or out of budget.

    judge(params) -> the greedy policy's exact success. Returns (carry, grids, history):
    history holds (env steps, seconds, exact success) after each call.
    """
    history = []
    while True:
        key, call_key = jax.random.split(key)
        carry, grids = step(carry, call_key)
        ev, steps = jax.device_get((carry.evaluation, carry.env_steps))
        seconds = time.perf_counter() - start
        history.append((int(steps), seconds, judge(carry.state.params)))
        if log:
            log(
                f"env_steps={steps} updates={int(carry.state.step)} success={ev.success_rate:.3f} "
                f"[{ev.success_low:.3f}, {ev.success_high:.3f}]/{ev.episodes:.0f} "
                f"exact={history[-1][2]:.3f} return={ev.mean_return:+.2f} t={seconds:.2f}s"
            )
        if evaluation.confirmed(ev, target, cfg.confirm_envs) or steps >= cfg.max_env_steps:
            return carry, grids, history


def train(cfg: LocalConfig = LocalConfig(), agent_config=None, log=None) -> TrainResult:
    """Trains until the success interval's lower bound reaches the target or the budget ends.

    agent_config: a config dataclass (default: the preset named by cfg.algo).
    log: optional callable(str) for a line per jitted call.
    """
    start = time.perf_counter()
    if cfg.rollout_length <= 0:
        cfg = dataclasses.replace(cfg, rollout_length=LONG_CHUNKS.get(cfg.algo, 16))
    env = make_env(cfg.map_name, slippery=cfg.slippery)
    agent = agents.make_agent(agent_config or agents.make_config(cfg.algo), env)
    best = exact.optimum(env, agent.config.discount)
    target = cfg.target_success
    if cfg.target_of_optimal:
        target = cfg.target_of_optimal * float(best.success[env.start_cell])
    init_key, key = jax.random.split(jax.random.PRNGKey(cfg.seed))
    init_fn, step = _compile(
        functools.partial(init_carry, env, agent, cfg),
        functools.partial(_train_call, env, agent, cfg, target),
        init_key,
        key,
        cfg.xla_opt_level,
    )
    compile_time = time.perf_counter() - start
    discount = agent.config.discount

    def judge(params):
        return evaluation.exact_answer(env, agent, params, discount, best)["success"]

    carry, grids, history = _loop(step, init_fn(init_key), key, cfg, target, log, start, judge)
    ev = _final_evaluation(env, agent, cfg, carry, key)
    wall_time = time.perf_counter() - start
    return TrainResult(
        solved=bool(evaluation.confirmed(ev, target, cfg.confirm_envs)),
        env_steps=int(carry.env_steps),
        updates=int(carry.state.step),
        iterations=int(carry.iterations),
        episodes=int(carry.episodes),
        wall_time=wall_time,
        compile_time=compile_time,
        success_rate=float(ev.success_rate),
        mean_return=float(ev.mean_return),
        mean_length=float(ev.mean_length),
        params=carry.state.params,
        report=evaluation.report(env, grids=grids),
        success_low=float(ev.success_low),
        success_high=float(ev.success_high),
        eval_episodes=int(ev.episodes),
        target=float(target),
        exact=evaluation.exact_answer(env, agent, carry.state.params, discount, best),
        history=tuple(history),
    )


def _final_evaluation(env, agent, cfg: LocalConfig, carry: TrainCarry, key):
    """The last evaluation if it already holds confirm_envs episodes (or is exact), else a
    fresh one of confirm_envs episodes: the figure a run reports is never a small sample."""
    ev = jax.device_get(carry.evaluation)
    if evaluation.is_deterministic(env) or ev.episodes >= cfg.confirm_envs:
        return ev
    evaluate = evaluation.make_evaluator(env, agent, cfg.confirm_envs)
    return jax.device_get(evaluate(carry.state.params, jax.random.fold_in(key, 2**31 - 1)))


def main(argv=None) -> TrainResult:
    """CLI: `python -m distrl.local --algo dqn|tabular|a2c|reinforce|vtrace|ppo|grpo`."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for field in dataclasses.fields(LocalConfig):
        flag = "--" + field.name.replace("_", "-")
        if field.type is bool or isinstance(field.default, bool):
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=field.default)
        else:
            parser.add_argument(flag, type=type(field.default), default=field.default)
    parser.add_argument("--quiet", action="store_true")
    args = vars(parser.parse_args(argv))
    quiet = args.pop("quiet")
    cfg = LocalConfig(**args)
    result = train(cfg, log=None if quiet else print)
    print(
        f"{cfg.algo} on {cfg.map_name}: solved={result.solved} env_steps={result.env_steps} "
        f"updates={result.updates} episodes={result.episodes} wall={result.wall_time:.2f}s "
        f"(compile {result.compile_time:.2f}s) success={result.success_rate:.3f} "
        f"[{result.success_low:.3f}, {result.success_high:.3f}]/{result.eval_episodes} "
        f"target={result.target:.3f} return={result.mean_return:+.2f} "
        f"length={result.mean_length:.1f}"
    )
    print(evaluation.describe_exact(result.exact))
    print(result.report)
    return result


if __name__ == "__main__":
    main()
