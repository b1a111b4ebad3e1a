"""The evaluator and budget sections (`config.evaluator`, `config.budget`): their
checks, and the targets a run stops at (`success_target`, `targets`).

What the evaluator node (`distrl.nodes.evaluator`), the single-process trainer
(`distrl.local`) and the progress line stop at or show. Both sections are this
module's: their fields with their defaults (`section_defaults`) and checks
(`check_section`).
"""

from distrl import envs
from distrl.envs import exact
from distrl.errors import check

AUTO = -1.0  # evaluator.target_success: 1.0 where the env has a success signal, else none
# What evaluator.target_of_optimal is a fraction of (`exact.Optimum`'s figure at the start).
OPTIMAL_MEASURES = ("success", "return")
# Episodes of one evaluation: 10**6 puts the Wilson interval within +-0.001; more only
# fills the evaluator's memory (its envs are stepped together, in one jit).
MAX_EVAL_EPISODES = 1_000_000

EVALUATOR_FIELDS = dict(
    num_envs=1000,  # episodes per evaluation (greedy unless sampled; 1 if deterministic)
    every_seconds=1.0,  # between evaluations (and budget checks), when every_env_steps is 0
    # > 0: evaluate each time the env steps pass a multiple of this instead, so how
    # often a run is judged does not depend on how fast its pipeline is
    every_env_steps=0,
    # stop once the success interval's lower bound is here (0: never); -1 (AUTO): 1.0 on
    # an env with a success signal (the gridworld), none on one without; a value 0..1
    # set on an env without a success signal is refused
    target_success=AUTO,
    # > 0: the target is this fraction of the exact optimum (envs.exact's pi* for the
    # agent's discount, expected over the env's start states) instead of
    # target_success, in the figure optimal_measure names
    target_of_optimal=0.0,
    # "success": of pi*'s success probability (a success target); "return": of pi*'s
    # undiscounted expected return, J* - (1 - fraction) |J*| (a return target in place
    # of target_return; exact.return_target: returns can be < 0)
    optimal_measure="success",
    # stop once the mean return's 95% interval lower bound is here (0: never); with a
    # success target set too, both must be reached
    target_return=0.0,
    confirm_envs=10_000,  # episodes of the confirming evaluation near the target
    # a run that ends on a budget or is stopped reports (and keeps) the confirmed params
    # with the best success lower bound rather than the last
    keep_best=True,
    sampled=False,  # evaluate the sampled policy instead of the greedy one
)
BUDGET_FIELDS = dict(
    env_steps=2_000_000,  # env steps of all actors together; 0: no limit
    learner_steps=0,  # learner updates; 0: no limit
    seconds=300.0,  # wall-clock seconds of the run; 0: no limit
)


def success_target(config, has_success: bool) -> float:
    """The success target a run stops at (0: none): evaluator.target_success, or with
    AUTO (the default) 1.0 on an env with a success signal and none on one without."""
    value = float(config.evaluator.target_success)
    if value == AUTO:
        return 1.0 if has_success else 0.0
    return value


def targets(config, env, best) -> tuple:
    """(success, mean return) a run stops at, 0 for none: `success_target` and
    evaluator.target_return, or with evaluator.target_of_optimal its fraction of pi*'s
    figure at the start (`exact.at_start`; `best`: `exact.Optimum` of env's tabular
    model for the agent's discount) in place of the one optimal_measure names, the
    success target (`success`) or the return target (`return`: `exact.return_target`,
    and no success target)."""
    e = config.evaluator
    success = success_target(config, envs.success_signal(env) is not None)
    target_return = float(e.target_return)
    if e.target_of_optimal and best is not None:
        model = envs.tabular_model(env)
        if e.optimal_measure == "return":
            optimal = exact.at_start(model, best.returns)
            success, target_return = 0.0, exact.return_target(optimal, e.target_of_optimal)
        else:
            success = float(e.target_of_optimal * exact.at_start(model, best.success))
    return float(success), target_return


def section_defaults(agent_config) -> dict:
    """The evaluator and budget sections with their defaults (any agent's)."""
    return {"evaluator": EVALUATOR_FIELDS, "budget": BUDGET_FIELDS}


def check_section(experiment) -> None:
    """ConfigError for an evaluator or budget value that cannot work, or that the
    experiment's env cannot score (`distrl.envs.interface`): a success target set (0..1)
    needs the env's success signal, a target of the optimum its tabular model (for the
    exact optimum) as well; the default success target (AUTO) applies only where there
    is a signal, and a run needs some target or budget to end on. The gridworld has
    both."""
    config = experiment.config
    _check_ranges(config.evaluator, config.budget)
    _check_env(config, experiment.env)


def _check_ranges(e, bud) -> None:
    check(e.num_envs >= 1, f"config.evaluator.num_envs={e.num_envs}; need >= 1")
    check(e.every_seconds > 0, f"config.evaluator.every_seconds={e.every_seconds}; need > 0")
    check(
        isinstance(e.every_env_steps, int) and e.every_env_steps >= 0,
        f"config.evaluator.every_env_steps={e.every_env_steps!r}; need an integer >= 0 "
        f"(0 = every every_seconds of wall time)",
    )
    for name in ("num_envs", "confirm_envs"):
        check(
            1 <= e[name] <= MAX_EVAL_EPISODES,
            f"config.evaluator.{name}={e[name]:,} episodes; need 1 .. {MAX_EVAL_EPISODES:,} "
            f"(10**6 put the 95% interval within +-0.001)",
        )
    check(
        0.0 <= e.target_of_optimal <= 1.0,
        f"config.evaluator.target_of_optimal={e.target_of_optimal}; need 0..1 (0 disables)",
    )
    check(
        e.optimal_measure in OPTIMAL_MEASURES,
        f"config.evaluator.optimal_measure={e.optimal_measure!r}; valid: {OPTIMAL_MEASURES}",
    )
    check(
        not (e.target_of_optimal and e.optimal_measure == "return" and e.target_return),
        f"config.evaluator.target_return={e.target_return:g} with target_of_optimal="
        f"{e.target_of_optimal} of the optimal return: two return targets; set one",
    )
    check(
        0.0 <= e.target_success <= 1.0 or e.target_success == AUTO,
        f"config.evaluator.target_success={e.target_success}; need 0..1 (0 disables) "
        f"or -1 (1.0 where the env has a success signal)",
    )
    for name in ("env_steps", "learner_steps", "seconds"):
        check(bud[name] >= 0, f"config.budget.{name}={bud[name]}; need >= 0 (0 = no limit)")


def _check_env(config, env) -> None:
    e, bud, kind = config.evaluator, config.budget, type(env).__name__
    has_success = envs.success_signal(env) is not None
    check(
        e.target_success <= 0 or has_success,
        f"config.evaluator.target_success={e.target_success}: the env ({kind}) has no "
        f"success signal; leave it at -1 (the default: a success target only where there "
        f"is one) or 0 and stop on config.evaluator.target_return (the mean return) or a "
        f"budget (config.budget)",
    )
    check(
        success_target(config, has_success)
        or e.target_of_optimal
        or e.target_return
        or bud.env_steps
        or bud.learner_steps
        or bud.seconds,
        "config.budget sets no limit and config.evaluator sets no target: "
        "the run would never stop; set one of them",
    )
    on_success = e.optimal_measure == "success"
    check(
        not e.target_of_optimal
        or (envs.tabular_model(env) is not None and (not on_success or has_success)),
        f"config.evaluator.target_of_optimal={e.target_of_optimal}: the env ({kind}) has no "
        f"tabular model{' with a success signal' if on_success else ''}, so no exact "
        f"optimum; set it to 0 and stop on a budget (config.budget)",
    )
