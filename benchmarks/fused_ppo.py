"""A benchmark ceiling, not a trainer: PPO as ONE jitted JAX program (rollout and update
fused in a `lax.scan`), the fastest a single process can train a config's PPO.

It takes from the experiment config only what it must share with the system it bounds:
the env (gymnax, stepped with gymnax's own auto-resetting `step`), the network (the
agent section's torso through `distrl.networks`, so conv or MLP and widths match) and
the settings (B = num_actors x actor.num_envs envs, T = actor.unroll_length, epochs,
minibatches, learning rate, clip, coefficients, discount, GAE lambda). Everything else
is written here, plainly: the rollout records only what PPO needs (obs, action, reward,
done, log-prob, value), GAE bootstraps from the last value, minibatches are shuffled
over T x B samples, Adam with a global-norm clip. No evaluation, no logging, no
host round trip inside a call.

    python -m benchmarks.fused_ppo --config=configs/ppo_breakout.py --seconds=20
    python -m benchmarks.fused_ppo --config=configs/ppo_breakout.py --env_steps=10000000

prints env steps/s (and, with --updates_return, the mean return of finished episodes
as it trains: a check that the ceiling learns, so it bounds real training).
"""

import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from distrl import experiment as experiment_lib
from distrl import networks


class Batch(NamedTuple):
    obs: jax.Array  # [T, B, *obs]
    action: jax.Array  # [T, B]
    reward: jax.Array  # [T, B]
    done: jax.Array  # [T, B]
    log_prob: jax.Array  # [T, B]
    value: jax.Array  # [T, B]


class Carry(NamedTuple):
    params: object
    opt_state: object
    env_state: object
    obs: jax.Array  # [B, *obs]
    episode_return: jax.Array  # [B]
    key: jax.Array


class Settings(NamedTuple):
    num_envs: int
    steps: int
    epochs: int
    minibatches: int
    discount: float
    gae_lambda: float
    clip: float
    value_coef: float
    entropy_coef: float


def settings_of(config) -> Settings:
    a = config.agent
    return Settings(
        config.num_actors * config.actor.num_envs,
        config.actor.unroll_length,
        a.num_epochs,
        a.num_minibatches,
        a.discount,
        a.gae_lambda,
        a.clip_epsilon,
        a.value_coef,
        a.entropy_coef,
    )


class Parts(NamedTuple):
    """The fused loop's pure functions (un-jitted) and its settings."""

    init: object  # key -> Carry
    rollout: object  # Carry -> (Carry, (Batch [T, B], last value [B], stats))
    update: object  # (Carry, Batch, last value) -> Carry
    iteration: object  # Carry -> (Carry, (episodes ended, their return sum)): both fused
    settings: Settings


def build(config) -> Parts:
    """The fused PPO loop's parts for `config` (a gymnax env, a PPO agent section)."""
    import gymnax  # noqa: PLC0415 - the ceiling is for gymnax envs

    env_id = config.env.name.removeprefix("gymnax:")
    env, env_params = gymnax.make(env_id)
    obs_shape = tuple(env.observation_space(env_params).shape)
    agent_config = experiment_lib.Experiment(config).agent_config
    torso = networks.torso_of(agent_config, obs_shape)
    net = networks.make_actor_critic_network(
        torso, env.action_space(env_params).n, agent_config.shared_torso
    )
    clip = agent_config.max_grad_norm
    optimizer = optax.chain(
        *([optax.clip_by_global_norm(clip)] if clip > 0 else []),
        optax.adam(agent_config.learning_rate),
    )
    s = settings_of(config)

    def init(key):
        net_key, env_key, key = jax.random.split(key, 3)
        params = net.init(net_key, jnp.zeros(obs_shape, jnp.float32))
        obs, env_state = jax.vmap(env.reset, (0, None))(
            jax.random.split(env_key, s.num_envs), env_params
        )
        zeros = jnp.zeros((s.num_envs,))
        return Carry(params, optimizer.init(params), env_state, obs, zeros, key)

    def env_step(carry, key):
        params, env_state, obs, ep_return = carry
        act_key, step_key = jax.random.split(key)
        logits, value = net.apply(params, obs)
        action = jax.random.categorical(act_key, logits)
        log_prob = jax.nn.log_softmax(logits)[jnp.arange(s.num_envs), action]
        next_obs, env_state, reward, terminated, truncated, _ = jax.vmap(env.step, (0, 0, 0, None))(
            jax.random.split(step_key, s.num_envs), env_state, action, env_params
        )
        done = terminated | truncated  # an end either way (a time limit is rare here)
        ep_return = ep_return + reward
        ended = (jnp.sum(done), jnp.sum(jnp.where(done, ep_return, 0.0)))
        step = Batch(obs, action, reward, done, log_prob, value)
        return (params, env_state, next_obs, jnp.where(done, 0.0, ep_return)), (step, ended)

    def gae(batch: Batch, last_value):
        def back(next_, step):
            next_adv, next_value = next_
            reward, done, value = step
            not_done = 1.0 - done
            delta = reward + s.discount * next_value * not_done - value
            adv = delta + s.discount * s.gae_lambda * not_done * next_adv
            return (adv, value), adv

        _, adv = jax.lax.scan(
            back,
            (jnp.zeros_like(last_value), last_value),
            (batch.reward, batch.done.astype(jnp.float32), batch.value),
            reverse=True,
        )
        return adv, adv + batch.value

    def loss(params, mb):
        obs, action, old_log_prob, adv, target = mb
        logits, value = net.apply(params, obs)
        log_probs = jax.nn.log_softmax(logits)
        log_prob = jnp.take_along_axis(log_probs, action[:, None], 1)[:, 0]
        ratio = jnp.exp(log_prob - old_log_prob)
        surrogate = jnp.minimum(ratio * adv, jnp.clip(ratio, 1 - s.clip, 1 + s.clip) * adv)
        entropy = -jnp.mean(jnp.sum(jnp.exp(log_probs) * log_probs, -1))
        value_loss = 0.5 * jnp.mean(jnp.square(value - target))
        return -jnp.mean(surrogate) + s.value_coef * value_loss - s.entropy_coef * entropy

    def minibatch(carry, mb):
        params, opt_state = carry
        grads = jax.grad(loss)(params, mb)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state), None

    def rollout(c: Carry):
        """(carry, Batch [T, B], last value [B], (episodes ended, their return sum))."""
        key, roll_key = jax.random.split(c.key)
        (_, env_state, obs, ep_return), (batch, ended) = jax.lax.scan(
            env_step,
            (c.params, c.env_state, c.obs, c.episode_return),
            jax.random.split(roll_key, s.steps),
        )
        _, last_value = net.apply(c.params, obs)
        stats = (jnp.sum(ended[0]), jnp.sum(ended[1]))
        return c._replace(env_state=env_state, obs=obs, episode_return=ep_return, key=key), (
            batch,
            last_value,
            stats,
        )

    def update(c: Carry, batch: Batch, last_value):
        """Epochs x shuffled minibatches of Adam steps on one rollout."""
        key, *epoch_keys = jax.random.split(c.key, 1 + s.epochs)
        adv, target = gae(batch, last_value)
        flat = jax.tree.map(
            lambda x: x.reshape((-1,) + x.shape[2:]),
            (batch.obs, batch.action, batch.log_prob, adv, target),
        )
        size = s.steps * s.num_envs // s.minibatches

        def epoch(carry, k):
            perm = jax.random.permutation(k, s.steps * s.num_envs)[: size * s.minibatches]
            mbs = jax.tree.map(lambda x: x[perm].reshape((s.minibatches, size) + x.shape[1:]), flat)
            return jax.lax.scan(minibatch, carry, mbs)[0], None

        (params, opt_state), _ = jax.lax.scan(epoch, (c.params, c.opt_state), jnp.stack(epoch_keys))
        return c._replace(params=params, opt_state=opt_state, key=key)

    def iteration(c: Carry):
        c, (batch, last_value, stats) = rollout(c)
        return update(c, batch, last_value), stats

    return Parts(init, rollout, update, iteration, s)


def make_call(config, iterations: int):
    """(init jitted, call(carry) -> (carry, stats [iterations]) jitted, env steps per call)."""
    parts = build(config)
    s = parts.settings

    def call(carry):
        return jax.lax.scan(lambda c, _: parts.iteration(c), carry, None, length=iterations)

    return jax.jit(parts.init), jax.jit(call), iterations * s.steps * s.num_envs


def measure(config, seconds: float, iterations_per_call: int = 4, log=None) -> dict:
    """Env steps/s of the fused loop over `seconds` after one compiled warm-up call; the
    mean return of the (sampled) episodes that finished in the window's last quarter
    beside it: how far it learned in that time. log(str): a line per call."""
    init, call, steps_per_call = make_call(config, iterations_per_call)
    carry = init(jax.random.PRNGKey(config.seed))
    carry, _ = call(carry)
    jax.block_until_ready(carry)
    start, steps, curve = time.perf_counter(), 0, []
    while time.perf_counter() - start < seconds:
        carry, (ended, total) = call(carry)
        ended, total = jax.device_get((ended, total))
        steps += steps_per_call
        elapsed = time.perf_counter() - start
        curve.append((elapsed, steps, float(ended.sum()), float(total.sum())))
        if log:
            log(
                f"t={elapsed:.1f}s env_steps={steps} return={total.sum() / max(ended.sum(), 1):.2f}"
            )
    elapsed = time.perf_counter() - start
    last = [c for c in curve if c[0] >= 0.75 * elapsed]
    episodes, returns = sum(c[2] for c in last), sum(c[3] for c in last)
    return {
        "env_steps_per_s": steps / elapsed,
        "env_steps": steps,
        "seconds": elapsed,
        "last_quarter_return": returns / max(episodes, 1),
    }


def run_to(config, env_steps: int, iterations_per_call: int = 50) -> tuple[dict, dict]:
    """Trains the fused loop for `env_steps` (whole calls) from scratch: (figures, the
    final params). Figures: the wall time from its build to the last step, compilation
    included, and the mean return of the episodes that ended in the last call (sampled,
    as it trains)."""
    start = time.perf_counter()
    init, call, steps_per_call = make_call(config, iterations_per_call)
    carry, steps = init(jax.random.PRNGKey(config.seed)), 0
    while steps < env_steps:
        carry, (ended, total) = call(carry)
        steps += steps_per_call
    ended, total = jax.device_get((ended, total))
    figures = {
        "env_steps": steps,
        "wall_seconds": time.perf_counter() - start,
        "last_call_return": float(total.sum() / max(ended.sum(), 1)),
    }
    return figures, carry.params


def _main():
    from absl import flags  # noqa: PLC0415

    from distrl import cli  # noqa: PLC0415

    holder = cli.define_config("configs/ppo_breakout.py")
    seconds = flags.DEFINE_float("seconds", 20.0, "Seconds to measure after the warm-up.")
    env_steps = flags.DEFINE_integer(
        "env_steps", 0, "> 0: train this many env steps from scratch instead, and time it all."
    )

    def run(argv):
        del argv
        config = cli.load(holder)
        if env_steps.value:
            print(run_to(config, env_steps.value)[0])
        else:
            print(measure(config, seconds.value, log=print))

    cli.run(run)


if __name__ == "__main__":
    _main()
