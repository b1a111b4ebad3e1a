"""distrl.local's compiled training call against the fused loop (`fused_ppo`), same env,
network and settings, the same iterations per call, timed in alternating slices so the
ratio compares two figures under the same load; the call with and without its
evaluations at the preset's cadence. Needs no Reverb, Launchpad or TensorFlow.

    python -m benchmarks.trainer --config=configs/ppo_breakout.py --seconds=6
"""

import functools

import jax
import jax.numpy as jnp

from benchmarks import fused_ppo
from benchmarks.common import measure_rates
from distrl import experiment as experiment_lib
from distrl import local

TRAINER_ITERATIONS = 2  # iterations per call, both loops; distrl.local evaluates at the
# preset's cadence across calls (ppo_breakout: 131,072 env steps, every 16 iterations)


def blocking(call):
    """call, waiting for its result: a slice of `measure_rates` then ends on time (JAX
    returns before computing, so an unblocked loop queues calls for the final sync)."""
    return lambda: jax.block_until_ready(call())


def same(x):
    return x


def local_call(config, eval_every: int):
    """distrl.local's compiled call (`local._train_call`) and its initial carry."""
    config = config.copy_and_resolve_references()
    config.local.iterations_per_call = TRAINER_ITERATIONS
    config.local.eval_every = eval_every
    cfg = local.Settings.of(experiment_lib.make(config))
    experiment = experiment_lib.Experiment(config)
    env, agent = experiment.env, experiment.agent
    target = local.evaluator_config.targets(config, env, None)
    init_key, key = jax.random.split(jax.random.PRNGKey(cfg.seed))
    init_fn, step = local._compile(
        functools.partial(local.init_carry, env, agent, cfg),
        functools.partial(local._train_call, env, agent, cfg, target),
        init_key,
        key,
        cfg.xla_opt_level,
    )
    state = {"carry": init_fn(init_key), "key": key}
    iterations = jnp.int32(TRAINER_ITERATIONS)  # a call's length, as distrl.local passes it

    def call():
        state["key"], k = jax.random.split(state["key"])
        state["carry"], _ = step(state["carry"], k, iterations)
        return state["carry"].env_steps

    return call


def against_fused(config, seconds: float) -> dict:
    """Env steps/s of distrl.local's calls (with and without its evaluations) and of the
    fused loop's, in alternating slices."""
    fused_init, fused_call, steps = fused_ppo.make_call(config, TRAINER_ITERATIONS)
    fused = {"carry": fused_init(jax.random.PRNGKey(config.seed))}

    def fused_step():
        fused["carry"], stats = fused_call(fused["carry"])
        return jax.block_until_ready(stats)

    never = 2**30  # local.eval_every: no evaluation within the measurement
    rates = measure_rates(
        {
            "local": (blocking(local_call(config, 0)), same),
            "local_no_eval": (blocking(local_call(config, never)), same),
            "fused": (fused_step, same),
        },
        seconds,
        repeats=3,
    )
    return {name: {"env_steps_per_s": rate * steps} for name, rate in rates.items()}


def _main():
    from absl import flags  # noqa: PLC0415

    from distrl import cli  # noqa: PLC0415

    holder = cli.define_config("configs/ppo_breakout.py")
    seconds = flags.DEFINE_float("seconds", 6.0, "Seconds of each figure (3 slices).")

    def run(argv):
        del argv
        config = cli.load(holder)
        print(f"{jax.default_backend()} ({jax.devices()[0].device_kind})")
        for name, figures in against_fused(config, seconds.value).items():
            print(f"{name:>14} {figures['env_steps_per_s']:>14,.0f} env steps/s")

    cli.run(run)


if __name__ == "__main__":
    _main()
