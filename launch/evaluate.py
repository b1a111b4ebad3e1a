"""Evaluate a run's policy: python launch/evaluate.py --run_dir=runs/<run>

Loads the policy the run's result.json reports (its params, which the evaluator
saved in <run_dir>/checkpoints/policy/), or with `--checkpoint=latest` the
learner's last checkpoint (`--checkpoint=1200`: its kept one of param version
1200); plays `--episodes` episodes from S with the policy as its run evaluated it
(greedy, or sampled where the run set `evaluator.sampled`; one greedy episode on a
deterministic map, where they are all alike and the figures exact), or as
`--play=greedy|sampled` says (a sampled run's greedy policy), and
prints the success rate and mean return with their 95% intervals (Wilson; normal for
the return), for a tabular env the exact success, value and expected
return of the greedy policy against the optimum (`distrl.envs.exact`, by DP over the
env's tables, over its start states where it has several: Taxi), the learned V(S)
beside the exact value of the policy it estimates (greedy for Q-learning, the
sampling policy for a critic; none without a critic), and on a grid the value,
greedy-action and value-error grids. `--json` prints one JSON object instead:
param_version, evaluation (its `policy`: greedy or sampled), exact (the value check
among its fields, `value_errors` per cell), values and actions ([rows][cols],
row-major, as in result.json).
Exit status 2, with one line, for a bad flag, a missing run directory or saved
policy, or a corrupt file; exit status 1, with one line naming the policy, the env,
the copy and the step, for a policy that acts non-finite (its params diverged: NaN),
found before the env steps with it, as the evaluator node finds it
(`rollout.check_actions`).
"""

import json
import os
import sys

import jax
import jax.numpy as jnp
from absl import flags

from distrl import cli, envs, policy
from distrl import config as config_lib
from distrl.acting import evaluation, exact_check, host_evaluation, intervals, reporting, rollout
from distrl.pyenv import EnvError
from distrl.records import results

_RUN_DIR = flags.DEFINE_string("run_dir", None, "The run directory whose policy to evaluate.")
_CHECKPOINT = flags.DEFINE_string(
    "checkpoint",
    policy.REPORTED,
    "reported: the policy result.json reports (checkpoints/policy/); latest: the "
    "learner's last checkpoint (checkpoints/learner/); a number: the learner's kept "
    "checkpoint of that param version (config.checkpoint.keep sets how many are kept).",
)
_EPISODES = flags.DEFINE_integer(
    "episodes", 10_000, "Greedy episodes to play (one on a deterministic map).", lower_bound=1
)
_SEED = flags.DEFINE_integer("seed", 0, "Seed of the episodes' slips.")
AS_RUN = "as_run"
_PLAY = flags.DEFINE_enum(
    "play",
    AS_RUN,
    [AS_RUN, "greedy", "sampled"],
    "as_run: as the run's evaluator played it (greedy unless evaluator.sampled); greedy: "
    "the argmax (or mean) action; sampled: actions drawn from the policy.",
)
_JSON = flags.DEFINE_bool("json", False, "Print one JSON object instead of text.")
flags.mark_flag_as_required("run_dir")


def evaluate(loaded: policy.Policy, episodes: int, seed: int, play: str = AS_RUN) -> dict:
    """The JSON-ready figures of `loaded`'s policy, played as `play` says (AS_RUN: as its
    run's evaluator played it, greedy unless `evaluator.sampled`): episodes, exact,
    grids. EnvError for a non-finite action (diverged params) or a failing env."""
    env, agent = loaded.env, loaded.agent
    greedy = not loaded.config.evaluator.sampled if play == AS_RUN else play == "greedy"
    exact = evaluation.is_deterministic(env, greedy)
    n = evaluation.episodes_needed(env, episodes, greedy)
    if envs.is_host_env(env):  # stepped in Python: episodes on the host
        player = host_evaluation.HostEvaluator(env, agent, n, greedy, loaded.config)
        try:
            played = player.play(loaded.params, jax.random.PRNGKey(seed))
        finally:
            player.close()
    else:
        act = evaluation.make_act(agent, greedy)
        play = jax.jit(lambda params, key: evaluation.play_episodes(env, act, params, key, n))
        played = jax.device_get(play(loaded.params, jax.random.PRNGKey(seed)))
        rollout.check_actions(
            played.first_nonfinite_action, loaded.config.env.name, evaluation.WHO, n
        )
    rate = float(played.success.mean())
    low, high = (rate, rate) if exact else intervals.wilson_interval(played.success.sum(), n)
    return_low, return_high = intervals.mean_interval(jnp.asarray(played.episode_return))
    reported = results.read(loaded.run_dir)
    figures = dict(
        run_dir=loaded.run_dir,
        checkpoint=loaded.which,
        file=os.path.relpath(loaded.file, loaded.run_dir),
        param_version=loaded.version,
        reported_version=(reported or {}).get("param_version"),  # result.json's, if any
        evaluation=reporting.shown(
            dict(
                policy="greedy" if greedy else "sampled",
                episodes=n,
                success_rate=rate,
                success_low=float(low),
                success_high=float(high),
                mean_return=float(played.episode_return.mean()),
                return_low=float(return_low),
                return_high=float(return_high),
                mean_length=float(played.length.mean()),
            ),
            env,  # the success figures only where the env has a success signal
        ),
    )
    if envs.tabular_model(env) is not None:  # the exact figures of a tabular env
        discount = agent.config.discount
        figures.update(exact=exact_check.exact_answer(env, agent, loaded.params, discount))
    if reporting.has_grids(env):  # and its grids on a grid
        values, actions = reporting.value_grid(env, agent, loaded.params)
        figures.update(
            map=list(envs.grid_of(env).desc), values=values.tolist(), actions=actions.tolist()
        )
    return figures


def _named(which: str, version: int, file: str) -> str:
    """'reported policy, version 7 (checkpoints/policy/...npz)': the policy evaluated."""
    if which == policy.REPORTED:
        title = "reported policy"
    else:
        title = "learner's last" if which == policy.LATEST else "learner's checkpoint"
    return f"{title}, version {version:,} ({file})"


def describe(figures: dict, env) -> str:
    """The text report of `evaluate`'s figures."""
    ev = figures["evaluation"]
    lines = [f"distrl: {_named(figures['checkpoint'], figures['param_version'], figures['file'])}"]
    if figures["checkpoint"] == policy.REPORTED and figures["reported_version"] not in (
        None,
        figures["param_version"],
    ):
        lines.append(f"note: result.json reports version {figures['reported_version']:,}")
    if "success_rate" in ev:
        lines.append(reporting.describe_success(ev))
    lines.append(
        f"mean return {ev['mean_return']:+.3f} [{ev['return_low']:+.3f}, "
        f"{ev['return_high']:+.3f}] (95%)  mean length {ev['mean_length']:.1f}  ({ev['policy']})"
    )
    if "exact" in figures:
        lines.append(reporting.describe_exact(figures["exact"]))
    if "values" in figures:
        grids = (figures["values"], figures["actions"])
        lines.append(reporting.report(env, grids=grids, answer=figures["exact"]))
    return "\n".join(lines)


def main(argv):
    del argv  # cli.run refuses positional arguments
    try:
        loaded = policy.load_policy(_RUN_DIR.value, _CHECKPOINT.value)
    except config_lib.ConfigError as err:  # a CheckpointError too
        message = "; ".join(line.strip() for line in str(err).splitlines())
        print(f"distrl: cannot evaluate: {message}", file=sys.stderr)
        return cli.BAD_INPUT
    try:
        figures = evaluate(loaded, _EPISODES.value, _SEED.value, _PLAY.value)
    except EnvError as err:  # a diverged policy (or a failing env): one line, as a failed run
        file = os.path.relpath(loaded.file, loaded.run_dir)
        print(f"distrl: {_named(loaded.which, loaded.version, file)}: {err}", file=sys.stderr)
        return 1
    print(json.dumps(figures) if _JSON.value else describe(figures, loaded.env), flush=True)
    return 0


if __name__ == "__main__":
    cli.run(main)
