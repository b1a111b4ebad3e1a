"""Stage 6 of the data flow: the evaluator node, which also decides when to stop.

Every `every_seconds`, or each time the actors' env steps pass a multiple of
`every_env_steps` (a cadence that does not depend on the pipeline's speed), it pulls
the learner's latest params, plays greedy (or sampled) episodes in one jitted call,
scores the policy exactly against the optimum where the env has a tabular model
(`envs.exact`), reads the counter and writes a row to `logs/evaluator.csv` (the
learning curves' and the launcher's progress line's source), with the replay table's
numbers (`ReplayMonitor`). A target counts only when its interval's lower bound
reaches it over `confirm_envs` episodes (`stop_reason`). At a target or a spent
budget it writes `result.json`, prints the final figures and grids, and stops the
program; the policy it would report is kept on disk as it changes
(`checkpoints.policy.Keeper`). docs/decisions.md, "The evaluator decides when to stop".
"""

import time

import jax
import numpy as np
from absl import logging

from distrl import envs, evaluator_config, metrics
from distrl.acting import exact_check, host_evaluation, intervals, reporting
from distrl.checkpoints import policy
from distrl.envs import exact
from distrl.nodes.counter import data_summary
from distrl.nodes.lifecycle import InProcess
from distrl.nodes.replay_monitor import ReplayMonitor
from distrl.nodes.variables import ParamsClient
from distrl.records import results


def stop_reason(config, report, counts, elapsed: float, target=None, target_return=None):
    """Why the run should end now, or None: target first, then each budget.

    The targets count only when the lower bounds of the success interval and of the
    mean return's, those set, reach them in an exact evaluation or one of
    `confirm_envs` episodes (`intervals.confirmed`); target None means
    config.evaluator.target_success set to a value (AUTO depends on the env: its caller
    passes `evaluator_config.targets`' first), target_return None
    config.evaluator.target_return. report None: budgets only.
    """
    budget = config.budget
    if target is None:
        target = float(config.evaluator.target_success)
        if target == evaluator_config.AUTO:
            raise ValueError("target_success is AUTO: pass the env's `target`")
    if target_return is None:
        target_return = config.evaluator.target_return
    confirm_envs = config.evaluator.confirm_envs
    if report is not None and intervals.confirmed(report, target, confirm_envs, target_return):
        return "target_reached"
    if budget.env_steps and counts.get("env_steps", 0) >= budget.env_steps:
        return "env_step_budget"
    if budget.learner_steps and counts.get("learner_steps", 0) >= budget.learner_steps:
        return "learner_step_budget"
    if budget.seconds and elapsed >= budget.seconds:
        return "time_budget"
    return None


def progress_line(elapsed: float, counts, report, success: bool = True) -> str:
    """One compact status line for the terminal (the success rate only if `success`:
    the env has a success signal)."""
    steps = counts.get("env_steps", 0)
    updates = counts.get("learner_steps", 0)
    rate = (
        f"  success {report.success_rate:.3f} [{report.success_low:.3f}, {report.success_high:.3f}]"
        if success
        else ""
    )
    return (
        f"[{elapsed:6.1f}s] env steps {steps:>10,.0f} ({steps / max(elapsed, 1e-9):>9,.0f}/s)"
        f"  updates {updates:>7,.0f} ({updates / max(elapsed, 1e-9):>6,.0f}/s)"
        f"  v{counts.get('param_version', 0):.0f}{rate}"
        f"  return {report.mean_return:+.2f} [{report.return_low:+.2f}, {report.return_high:+.2f}]"
        f"  length {report.mean_length:5.1f}"
    )


def eval_row(counts, report, rates, elapsed: float, answer=None, success: bool = True) -> dict:
    """One evaluator metrics row: progress, throughput, the greedy evaluation (its
    success figures only if `success`: the env has a success signal) and, given
    `answer` (`exact_check.exact_answer`), the exact success and mean return and the
    optimum's."""
    row = dict(
        elapsed=elapsed,
        env_steps=counts.get("env_steps", 0),
        env_steps_per_s=rates.get("env_steps", 0.0),
        episodes=counts.get("episodes", 0),
        learner_steps=counts.get("learner_steps", 0),
        updates_per_s=rates.get("learner_steps", 0.0),
        param_version=counts.get("param_version", 0),
        success_rate=report.success_rate,
        success_low=report.success_low,
        success_high=report.success_high,
        eval_episodes=report.episodes,
        mean_return=report.mean_return,
        return_low=report.return_low,
        return_high=report.return_high,
        mean_length=report.mean_length,
    )
    if not success:
        row = {k: v for k, v in row.items() if not k.startswith("success")}
    if answer is not None:
        row.update(exact_success=answer["success"], optimal_success=answer["optimal_success"])
        row.update(exact_return=answer["mean_return"], optimal_return=answer["optimal_return"])
    return row


class Evaluator:
    """Courier node: evaluates periodically and stops the program when done."""

    def __init__(
        self,
        experiment,
        learner,
        counter,
        replay_client,
        run_dir: str,
        start_time: float,
        initial_counts=None,
        lifecycle=None,
    ):
        self._experiment = experiment  # `distrl.experiment`: built once, in this process
        self._config = experiment.config
        self._lifecycle = lifecycle or InProcess()  # `distrl.nodes.lifecycle`
        self._initial_counts = dict(initial_counts or {})  # a resumed run's totals
        self._learner = learner
        self._counter = counter
        self._replay = replay_client
        self._run_dir = run_dir
        self._start = start_time
        self._last_params = None
        # the reported policy's file
        self._policy = policy.Keeper(run_dir, experiment.config.algorithm)

    def run(self) -> None:
        with self._lifecycle.guard("evaluator", self._run_dir):
            self._run()

    def _run(self) -> None:
        c = self._config
        env, agent = self._experiment.env, self._experiment.agent
        greedy = not c.evaluator.sampled
        # jitted episodes, or played on the host for an env stepped in Python
        evaluate = host_evaluation.make_evaluator(env, agent, c.evaluator.num_envs, greedy, c)
        confirm = host_evaluation.make_evaluator(env, agent, c.evaluator.confirm_envs, greedy, c)
        model = envs.tabular_model(env)  # the exact figures need one; None: no judge
        best = exact.optimum(model, agent.config.discount) if model is not None else None

        def judge(params):
            if model is None:
                return None
            return exact_check.exact_answer(env, agent, params, agent.config.discount, best)

        source = ParamsClient(self._learner)
        log = metrics.MetricsLogger(self._run_dir, "evaluator")
        monitor = ReplayMonitor(self._replay, self._run_dir, c.log.every_seconds)
        targets = evaluator_config.targets(c, env, best)  # (success, mean return)
        if source.wait_first(self._lifecycle.should_stop):
            reason, report, counts, kept = self._loop(
                (evaluate, confirm, judge), source, log, monitor, targets
            )
        else:
            reason, report, counts, kept = "stopped", None, {}, (source.params, source.version)
        answer = judge(kept[0]) if report is not None else None  # None without a model
        if report is not None:
            self._policy.offer(*kept, report._asdict(), final=True)
        self._finish(reason, env, agent, kept, report, counts, monitor.summary(), answer)
        log.close()
        monitor.close()
        if reason != "stopped":
            self._lifecycle.request_stop()

    def _loop(self, evaluators, source, log, monitor, targets):
        """Evaluates until there is a stop reason (targets: `evaluator_config.targets`).

        evaluators: (evaluate, confirm, judge): the routine evaluation, the large
        confirming one (also the final report's), and the exact figures' function.
        Returns (reason, report, counts, (params, version)): the params the result
        is about (`reported_at_end`).
        """
        c = self._config
        evaluate, confirm, judge = evaluators
        target, target_return = targets
        success = reporting.has_success(self._experiment.env)
        confirm_envs = c.evaluator.confirm_envs
        key = jax.random.PRNGKey(c.seed + 7)
        rates = metrics.RateWindow()
        counts = first_counts(self._counter, self._lifecycle.should_stop, self._initial_counts)
        # (report, params, version) of the best confirm_envs-episode evaluation, from
        # an earlier launch of this run too (a restarted evaluator, a resume)
        best = self._saved_best(source.params, confirm_envs)
        while True:
            key, eval_key, confirm_key = jax.random.split(key, 3)
            report = jax.device_get(evaluate(source.params, eval_key))
            if intervals.touches(report, target, confirm_envs, target_return):
                # many more episodes decide, not this sample
                report = jax.device_get(confirm(source.params, confirm_key))
            counts = self._read_counts(counts)
            elapsed = time.time() - self._start
            answer = judge(source.params)
            row = eval_row(counts, report, rates.rates(counts), elapsed, answer, success)
            log.write(row["env_steps"], row)
            monitor.maybe_log(row["env_steps"])
            print(progress_line(elapsed, counts, report, success), flush=True)
            best = better_report(best, (report, source.params, source.version), confirm_envs)
            # What a budget would end with now (the kept best, else these params): on disk.
            kept = best is not None and c.evaluator.keep_best
            reported = best if kept else (report, source.params, source.version)
            self._policy.offer(reported[1], reported[2], reported[0]._asdict())
            reason = stop_reason(c, report, counts, elapsed, target, target_return)
            if reason is None and self._wait_until_due(counts):
                reason = "stopped"  # a signal, Ctrl-C, or a failed node
            if reason is not None:
                if reason not in ("target_reached", "stopped") and source.refresh_now():
                    # the budget ran out during this evaluation (a first compile under
                    # load takes seconds): the run's last policy is the learner's newest
                    report = jax.device_get(confirm(source.params, confirm_key))
                    reason = stop_reason(c, report, counts, elapsed, target, target_return)
                elif report.episodes < confirm_envs:
                    report = jax.device_get(confirm(source.params, confirm_key))
                self._last_params = source.params
                final = reported_at_end(
                    reason, best, (report, source.params, source.version), c.evaluator
                )
                return reason, final[0], counts, final[1:]
            self._last_params = source.params
            source.refresh_now()

    def _saved_best(self, template, confirm_envs: int):
        """The policy an earlier launch of this run kept, as `better_report`'s best
        (None: none, or not a kept confirmed one)."""
        saved = self._policy.restore(template)
        if saved is None or not saved[0]:
            return None
        report = intervals.EvalResult(**{k: np.float32(v) for k, v in saved[0].items()})
        return better_report(None, (report, *saved[1:]), confirm_envs)

    def _wait_until_due(self, counts) -> bool:
        """Waits until the next evaluation is due; True if the program is stopping.

        Due after `every_seconds` of wall time, or with `every_env_steps` once the
        counter's env steps pass its next multiple (marks passed during an evaluation
        are skipped, not caught up); either way as soon as a budget is spent (the
        counter is read every `_POLL_SECONDS`), so the run ends at its budget, not at
        the next evaluation, and a stalled pipeline still ends on time.
        """
        c = self._config
        every = c.evaluator.every_env_steps
        mark = next_mark(counts.get("env_steps", 0), every) if every else None
        due = time.time() + c.evaluator.every_seconds
        while not self._lifecycle.should_stop(_POLL_SECONDS):
            counts = self._read_counts(counts)
            if counts.get("env_steps", 0) >= mark if every else time.time() >= due:
                return False
            if stop_reason(c, None, counts, time.time() - self._start, target=0.0):
                return False
        return True

    def _read_counts(self, previous):
        """The counter's totals, or the previous ones if it is too busy to answer."""
        try:
            return self._counter.get_counts()
        except Exception as err:  # noqa: BLE001 - courier raises grpc-level errors
            logging.info("evaluator: counter did not answer (%s)", err)
            return previous

    def _finish(self, reason, env, agent, kept, report, counts, replay_summary, answer):
        params, version = kept
        result = dict(
            stop_reason=reason,
            wall_seconds=time.time() - self._start,
            param_version=version,  # the params this result is about
            kept_best=params is not self._last_params,  # not the last evaluated params
            policy=self._policy.on_disk(),  # the file holding those params (checkpoints.policy)
            counts=counts,
            evaluation=reporting.shown(report._asdict(), env) if report is not None else None,
            evaluated="sampled" if self._config.evaluator.sampled else "greedy",  # the policy
            exact=answer,
            replay=replay_summary,
            data=data_summary(counts),
        )
        if reporting.has_grids(env):
            result.update(map=list(envs.grid_of(env).desc))
        if report is not None and reporting.has_grids(env):
            values, actions = reporting.value_grid(env, agent, params)
            grids = reporting.report(env, grids=(values, actions), answer=answer)
            result.update(grids=grids, values=values.tolist(), actions=actions.tolist())
        result = jax.tree.map(_plain, result)
        print(results.summary(result, self._run_dir), flush=True)
        results.write(self._run_dir, result)


_POLL_SECONDS = 0.05  # how often the evaluator reads the counter between evaluations


def next_mark(env_steps: int, every: int) -> int:
    """The first multiple of `every` env steps after `env_steps`."""
    return (int(env_steps) // every + 1) * every


def first_counts(counter, should_stop, fallback: dict) -> dict:
    """The counter's totals once it first answers (retried each second), or `fallback`
    if the program stops first. Rows start from the counter's figures, never from a
    placeholder: an evaluator restarted while the counter moved (a lost machine on Ray)
    would log zeros until it answered, and its totals would seem to go back."""
    while True:
        try:
            return counter.get_counts()
        except Exception as err:  # noqa: BLE001 - courier raises grpc-level errors
            logging.info("evaluator: waiting for the counter's first answer (%s)", err)
        if should_stop(1.0):
            return fallback


def reported_at_end(reason: str, best, last, evaluator_config):
    """The (report, params, version) a run ending for `reason` reports and keeps: the
    last evaluated at its target; with `evaluator.keep_best`, at a budget or a stop
    (a signal, Ctrl-C, a failed node) the confirmed ones with the best lower bound
    (`better_report`), which the evaluator saved as the policy while the run went on
    (a stop right after a perfect row must not report the next, worse params)."""
    if reason == "target_reached" or not evaluator_config.keep_best:
        return last
    return better_report(best, last, evaluator_config.confirm_envs)


def better_report(best, candidate, confirm_envs: int):
    """The (report, params, version) with the higher success lower bound, then (a tie:
    any env without a success signal) the higher mean return lower bound, among those
    of at least confirm_envs episodes (a later one wins a tie); best may be None."""
    report = candidate[0]
    if report.episodes < confirm_envs and report.success_low != report.success_high:
        return best
    rank = lambda r: (r.success_low, r.return_low)  # noqa: E731
    if best is None or rank(report) >= rank(best[0]):
        return candidate
    return best


def _plain(x):
    """JSON-friendly scalars (numpy / jax numbers -> Python numbers)."""
    return x.item() if hasattr(x, "item") else x
