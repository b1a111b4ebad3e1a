"""The peer: a plain-Python single-env DQN loop, as the series wrote it (SEEDS.md, day 5).

One env stepped per Python call (distrl's gridworld, `env.step` jitted on its own),
a Python list as the replay buffer, one jitted update per env step on a batch of
32 sampled with `random.sample`, learning from 200 transitions on, the target
network copied every 100 steps, an MLP on the one-hot observation, epsilon from 1.0
times 0.995 per episode down to 0.01. Nothing here uses distrl's agents, rollout or
Reverb: it is the design distrl replaces, so the ratio of the two is the gain.

    python benchmarks/peer_dqn.py --seconds=60     # prints one JSON line
"""

import argparse
import itertools
import json
import random
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

from distrl.envs import make_env

BATCH, LEARN_START, TARGET_EVERY, CAPACITY = 32, 200, 100, 10_000
GAMMA, LR = 0.99, 1e-3
EPS_DECAY, EPS_MIN = 0.995, 0.01
EVAL_EVERY = 10  # episodes between greedy checks


def init_mlp(key, sizes=(16, 64, 64, 4)):
    """[(w, b)] of an MLP with the given layer sizes."""
    params = []
    for n_in, n_out in itertools.pairwise(sizes):
        key, sub = jax.random.split(key)
        params.append(
            (jax.random.normal(sub, (n_in, n_out)) * jnp.sqrt(2.0 / n_in), jnp.zeros(n_out))
        )
    return params


def q_values(params, obs):
    """obs [..., 16] -> Q [..., 4]."""
    x = obs
    for w, b in params[:-1]:
        x = jax.nn.relu(x @ w + b)
    w, b = params[-1]
    return x @ w + b


optimizer = optax.adam(LR)


@jax.jit
def update(params, target, opt_state, obs, action, reward, done, next_obs):
    """One step on a batch [32]: squared TD error against the target network."""

    def loss(p):
        q = q_values(p, obs)[jnp.arange(obs.shape[0]), action]
        target_q = reward + GAMMA * (1.0 - done) * q_values(target, next_obs).max(-1)
        return jnp.mean((q - jax.lax.stop_gradient(target_q)) ** 2)

    grads = jax.grad(loss)(params)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state


def greedy_episode(env, step, reset, act, params, key) -> bool:
    """One greedy episode (the non-slippery map is deterministic); True on the goal."""
    state, ts = reset(key)
    for _ in range(env.time_limit):
        action = int(np.argmax(act(params, ts.observation)))
        state, ts = step(state, action, key)
        if bool(ts.last):
            return float(ts.reward) > 0
    return False


def train(seconds: float, seed: int = 0) -> dict:
    """Trains until a greedy episode reaches the goal or `seconds` pass."""
    start = time.perf_counter()
    rng, key = random.Random(seed), jax.random.PRNGKey(seed)
    env = make_env("4x4")
    step, reset, act = jax.jit(env.step), jax.jit(env.reset), jax.jit(q_values)
    params = init_mlp(key)
    target, opt_state = params, optimizer.init(params)
    buffer, eps, steps, episodes, solved = [], 1.0, 0, 0, False
    mark = None  # (time, steps) once everything is compiled: the rate's start
    while not solved and time.perf_counter() - start < seconds:
        state, ts = reset(key)
        obs, done = np.asarray(ts.observation), False
        while not done:
            if rng.random() < eps:
                action = rng.randrange(4)
            else:
                action = int(np.argmax(act(params, obs)))
            state, ts = step(state, action, key)
            next_obs, done = np.asarray(ts.observation), bool(ts.last)
            buffer.append((obs, action, float(ts.reward), float(ts.discount == 0), next_obs))
            if len(buffer) > CAPACITY:
                buffer.pop(0)
            obs, steps = next_obs, steps + 1
            if len(buffer) >= LEARN_START:
                batch = [np.array(x) for x in zip(*rng.sample(buffer, BATCH))]
                params, opt_state = update(params, target, opt_state, *batch)
                mark = mark or (time.perf_counter(), steps)
            if steps % TARGET_EVERY == 0:
                target = params
        episodes += 1
        eps = max(EPS_MIN, eps * EPS_DECAY)
        if episodes % EVAL_EVERY == 0:
            solved = greedy_episode(env, step, reset, act, params, key)
    wall = time.perf_counter() - start
    rate_start, rate_steps = mark or (start, 0)
    return {
        "reached": solved,
        "env_steps": steps,
        "episodes": episodes,
        "train_wall": wall,
        "env_steps_per_s": (steps - rate_steps) / max(time.perf_counter() - rate_start, 1e-9),
    }


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    result = train(args.seconds, args.seed)
    print(json.dumps(result), flush=True)
    return result


if __name__ == "__main__":
    main()
