"""Section `minatar`: the Breakout-MinAtar workload's stages, each against its
own ceiling, measured side by side in the bench process (`common.measure_rates`:
alternating slices, so each ratio compares two figures under the same load).

- trainer: `distrl.local`'s compiled call (its evaluations at the preset's cadence
  included, and without them) against `fused_ppo`'s fused rollout+update loop at the
  same env, network and settings, the same iterations per call;
- actor rollout: `rollout.make_rollout` with the preset's policy at the actor's [T, B]
  against `ceilings.scan_ceiling`, a jitted scan of gymnax's own step and the same network
  and acting policy (its params an argument, as the actor's; nothing recorded but rewards);
- update: the agent's jitted update on a device-resident learner batch
  (`ceilings.update_ceiling`), PPO's against `fused_ppo`'s update alone on the same
  [T, B] shape;
- Reverb insert and read of the presets' [T, B, 10, 10, 4] items (`ceilings.reverb_ceilings`);
- evaluation: greedy episodes through the network (`evaluation.run_episodes`,
  evaluator.num_envs of them, the initial params), env steps/s, and what a
  confirmation (confirm_envs episodes of up to the env's 1,000 steps) costs at that rate;
- distributed (run by `benchmarks/run.py` after these, in a subprocess): the trainer's
  preset as the real program (`stages.py` e2e, 2 actors, `local_mp`), its env steps/s
  over a window of several updates against the trainer part's fused loop.
"""

import time

import jax
import jax.numpy as jnp

from benchmarks import ceilings, fused_ppo, tables, trainer
from benchmarks.common import measure_rates
from distrl import experiment as experiment_lib
from distrl.acting import evaluation

PRESETS = ("ppo_breakout", "dqn_breakout")
TRAINER_PRESET = "ppo_breakout"


def actor_rollouts(configs, seconds: float) -> dict:
    """Per preset: the actor's rollout and its compute against `ceilings.scan_ceiling`
    (`ceilings.against_scan`); env steps/s."""
    return {name: ceilings.against_scan(config, seconds) for name, config in configs.items()}


def ppo_updates(config, seconds: float) -> dict:
    """PPO's jitted update (agent.update, the learner's [T, batch_chunks x B] batch on the
    device) against the fused loop's update alone on the same shape; updates/s."""
    learner = config.copy_and_resolve_references()
    learner.num_actors = learner.learner.batch_chunks  # the fused loop's B = one update's
    parts = fused_ppo.build(learner)
    carry = jax.jit(parts.init)(jax.random.PRNGKey(0))
    carry, (batch, last_value, _) = jax.jit(parts.rollout)(carry)
    fused_update = jax.jit(parts.update)
    agent = experiment_lib.Experiment(config).agent
    work = ceilings.ActorWork(learner.copy_and_resolve_references())
    state = agent.init(jax.random.PRNGKey(0))
    chunk = jax.tree.map(lambda *x: jnp.concatenate(x, 1), *[work.chunk()[0]] * learner.num_actors)
    rates = measure_rates(
        {
            "agent": (trainer.blocking(lambda: agent.update(state, chunk)[0].params), trainer.same),
            "fused": (
                trainer.blocking(lambda: fused_update(carry, batch, last_value).params),
                trainer.same,
            ),
        },
        seconds,
        repeats=3,
    )
    return {
        "agent_updates_per_s": rates["agent"],
        "fused_updates_per_s": rates["fused"],
        "batch": str(list(chunk.action.shape)),
    }


def evaluation_cost(config, seconds: float) -> dict:
    """Greedy episodes of evaluator.num_envs envs with the initial params: env steps/s,
    and the seconds a confirmation of confirm_envs episodes of the env's longest (its
    time limit) would take at that rate."""
    experiment = experiment_lib.Experiment(config)
    env, agent = experiment.env, experiment.agent
    params = agent.init(jax.random.PRNGKey(0)).params
    act = evaluation.make_act(agent, greedy=True)
    n = config.evaluator.num_envs
    play = jax.jit(lambda k: evaluation.play_episodes(env, act, params, k, n).length)
    jax.block_until_ready(play(jax.random.PRNGKey(0)))
    start, steps, calls = time.perf_counter(), 0, 0
    while time.perf_counter() - start < seconds or not calls:
        steps += int(jnp.sum(play(jax.random.PRNGKey(calls))))
        calls += 1
    elapsed = time.perf_counter() - start
    rate = steps / elapsed
    limit = env.spec.time_limit
    return {
        "env_steps_per_s": rate,
        "seconds_per_evaluation": elapsed / calls,
        "mean_length": steps / (calls * n),
        "confirmation_s": config.evaluator.confirm_envs * limit / rate,
        "episodes": n,
        "confirm_envs": config.evaluator.confirm_envs,
        "time_limit": limit,
    }


def measure(configs, seconds: float, trainer_seconds: float, out: dict, save=lambda: None):
    """Every figure of the section for {name: config} of PRESETS, into `out` part by part
    (`save()` after each, so a failure keeps what was measured)."""
    out["trainer"] = trainer.against_fused(configs[TRAINER_PRESET], trainer_seconds)
    save()
    out["actors"] = actor_rollouts(configs, seconds)
    out["updates"] = {name: ceilings.update_ceiling(c, seconds) for name, c in configs.items()}
    out["updates"][TRAINER_PRESET].update(ppo_updates(configs[TRAINER_PRESET], seconds))
    save()
    with tables.server_process(configs) as addresses:
        out["reverb"] = {
            name: ceilings.reverb_ceilings(ceilings.ActorWork(c), addresses[name], seconds)
            for name, c in configs.items()
        }
    out["evaluation"] = {name: evaluation_cost(c, seconds) for name, c in configs.items()}
    return out
