"""The rows of the benchmark table, declared as data, and the one function that computes them.

A row names where its figure sits in `run.py`'s results (a dotted path such as
'stages.dqn.actor.env_steps_per_s'), its unit, where its ceilings sit (the lowest
one measured counts), its goal ('>= 0.8x' on the ratio, '<= 10 s'
on the figure) and a note template ('{path}' or '{path:unit}' are filled in from the
results). A row with "<algo>", "<actor>" or "<role>" in a field stands for one row per
algorithm, actor (the env presets too) or node group (`expand`). Every ratio
divides two figures of the same run. Sections that did not run (or failed) give
rows with no figure and the error as the note, so the table keeps its shape.
"""

import dataclasses
import re

from benchmarks.report import Row, fmt

ALGOS = ("dqn", "ppo")
# Env presets whose actors get rows against their own rollout (configs/<name>.py): a
# vector env through chunks and an image env (conv torso) through n-step replay.
ENV_PRESETS = ("ppo_cartpole", "dqn_breakout")
# The single-process trainer's preset and seed, run as a user runs it and with
# benchmarks/slippery.py's settings (section `local`; a fixed seed).
LOCAL_PRESET = ("ppo_slippery8x8", 13)
# The Breakout-MinAtar presets of section `minatar` (benchmarks/minatar.py).
MINATAR = ("ppo_breakout", "dqn_breakout")
# Replay presets of a Box env whose learner alone gets a row against its own jitted
# update (section `stages`, its actor filling the table first: SAC).
LEARNERS = ("sac_pendulum",)
# Recurrent presets (section `recurrent`): the actor against a jitted scan of the
# same env and network carrying the core's state, the learner against its jitted update
# (recurrent PPO on chunks, R2D2 on sequences sampled from a replay table).
RECURRENT = ("ppo_masked_cartpole", "r2d2_masked_cartpole")
# Presets of section `capacity` (benchmarks/capacity_bench.py): their stages' rates per core
# feed the capacity model (benchmarks/capacity.py), whose predictions for CAPACITY_ACTORS
# actors on this host are checked against the real program end to end, per entry of
# CAPACITY_CHECKS ({name: (preset, its config overrides)}).
CAPACITY = ("dqn", "ppo", "dqn_breakout", "ppo_gymnasium_cartpole")
CAPACITY_ACTORS = (1, 2)
CAPACITY_CHECKS = {"dqn": ("dqn", {}), "ppo": ("ppo", {})}
CAPACITY_GOAL = "within 25%"  # the prediction against the program measured end to end
# every config the bench runs (its overrides')
CONFIGS = tuple(dict.fromkeys(ALGOS + ENV_PRESETS + LEARNERS + MINATAR + RECURRENT + CAPACITY))
ROLES = ("replay", "counter", "learner", "actor", "evaluator")  # node groups of make_program
E2E_ACTORS = 2  # the end-to-end program's actors
HOST_TOGETHER = (1, 2, 4)  # host-stepped actor processes stepping at once


@dataclasses.dataclass(frozen=True)
class Spec:
    """One declared row (see the module docstring). `only_if`: a path (or a tuple of
    paths) that must hold a true value for the figure to count (a time to solve counts
    once it solved)."""

    section: str
    label: str
    figure: str = ""
    unit: str = ""
    ceiling: tuple = ()
    ceiling_name: str = ""
    goal: str = ""
    note: str = ""
    only_if: str | tuple = ""


ACTORS = ALGOS + ENV_PRESETS  # the actor rows: the gridworld's and the env presets'
_PLACEHOLDERS = {
    "<algo>": ALGOS,
    "<actor>": ACTORS,
    "<role>": ROLES,
    "<minatar>": MINATAR,
    "<recurrent>": RECURRENT,
}


def expand(spec: Spec) -> list:
    """`spec` once per value of each placeholder it uses ('<algo>': dqn, ppo; '<actor>':
    those and the env presets; '<role>': the node groups), in that order."""
    specs = [spec]
    for placeholder, values in _PLACEHOLDERS.items():
        if placeholder in repr(spec):
            specs = [_fill(s, placeholder, value) for s in specs for value in values]
    return specs


def _fill(spec: Spec, placeholder: str, value: str) -> Spec:
    def sub(x):
        if isinstance(x, tuple):
            return tuple(sub(y) for y in x)
        return x.replace(placeholder, value)

    return Spec(**{k: sub(v) for k, v in dataclasses.asdict(spec).items()})


# Where a whole program's time went (`stages.summarize_e2e`), for the figures under <at>.
_PROGRAM_SHARES = (
    "learner waits {<at>.wait_share:share}, actors blocked {<at>.actor_blocked_share:share}; "
    "CPU cores {<at>.cores_total} ({<at>.cores_text})"
)

_E2E_NOTE = (
    "{e2e.<algo>.updates_per_s} upd/s, {e2e.<algo>.samples_per_s} samples/s, "
    "SPI {e2e.<algo>.samples_per_insert}, lag {e2e.<algo>.mean_version_lag}, "
    "data age {e2e.<algo>.data_age_mean} (max {e2e.<algo>.data_age_max}), "
) + _PROGRAM_SHARES.replace("<at>", "e2e.<algo>")

ROWS = [
    # 1. Each stage's work alone, in the bench process.
    Spec(
        "1 ceilings",
        "<actor> rollout {ceilings.<actor>.rollout.shape} (no I/O)",
        figure="ceilings.<actor>.rollout.steps_per_s",
        unit="env steps/s",
    ),
    Spec(
        "1 ceilings",
        "<actor> actor compute (rollout + items + device_get)",
        figure="ceilings.<actor>.actor_compute.steps_per_s",
        unit="env steps/s",
        ceiling=("ceilings.<actor>.rollout.steps_per_s",),
        ceiling_name="rollout",
        goal=">= 0.8x",
    ),
    Spec(
        "1 ceilings",
        "<algo> update {ceilings.<algo>.update.batch} (device batches)",
        figure="ceilings.<algo>.update.updates_per_s",
        unit="updates/s",
        note="{ceilings.<algo>.update.samples_per_s} samples/s",
    ),
    *[
        Spec(
            "1 ceilings",
            f"{name} update {{ceilings.{name}.update.batch}} (device batches)",
            figure=f"ceilings.{name}.update.updates_per_s",
            unit="updates/s",
            note=f"{{ceilings.{name}.update.samples_per_s}} samples/s",
        )
        for name in LEARNERS
    ],
    Spec(
        "1 ceilings",
        "<algo> Reverb insert (replay.Writer, server in a child process)",
        figure="ceilings.<algo>.reverb.insert_steps_per_s",
        unit="transitions/s",
        note="{ceilings.<algo>.reverb.insert_items_per_s} items/s",
    ),
    Spec(
        "1 ceilings",
        "<algo> Reverb read (replay.make_dataset + to_learner_batch)",
        figure="ceilings.<algo>.reverb.read_samples_per_s",
        unit="samples/s",
        note="{ceilings.<algo>.reverb.read_batches_per_s} batches/s",
    ),
    Spec(
        "1 host env",
        "gymnasium CartPole-v1, {host.random.num_envs} checked copies in the actor's sync "
        "vector env, random actions (no policy)",
        figure="host.random.steps_per_s",
        unit="env steps/s",
        note="mean episode {host.random.episode_length} steps; gymnasium's own SyncVectorEnv "
        "of unchecked copies {host.random.gymnasium_steps_per_s} env steps/s",
    ),
    Spec(
        "1 host env",
        "<algo> host-stepped actor compute on it (policy per step, items, no Reverb)",
        figure="host.<algo>.actor_steps_per_s",
        unit="env steps/s",
        ceiling=("host.random.steps_per_s",),
        ceiling_name="env alone",
        goal=">= 0.7x",
        note="T={host.<algo>.unroll_length}, mean episode {host.<algo>.episode_length} steps; "
        "without the step deadline {host.<algo>.actor_no_deadline_steps_per_s} env steps/s",
    ),
    Spec(
        "1 host env",
        "<algo> host-stepped actor against the env alone in CPU time (env steps per CPU "
        "second of the process, the load aside)",
        figure="host.<algo>.steps_per_cpu_s",
        unit="env steps/s",
        ceiling=("host.random.steps_per_cpu_s",),
        ceiling_name="env alone",
        goal=">= 0.7x",
        note="CPU per env step {host.<algo>.actor_cpu_us_per_step} us, the env alone's "
        "{host.random.cpu_us_per_step} us (the least of the slices)",
    ),
    Spec(
        "1 host env",
        "CartPole-v1, {host.vector.num_envs} copies, sync vector env, random actions",
        figure="host.vector.sync.random_steps_per_s",
        unit="env steps/s",
    ),
    Spec(
        "1 host env",
        "CartPole-v1, {host.vector.num_envs} copies in subprocesses (env.vector=async), "
        "random actions",
        figure="host.vector.async.random_steps_per_s",
        unit="env steps/s",
        ceiling=("host.vector.sync.random_steps_per_s",),
        ceiling_name="sync",
    ),
    *[
        Spec(
            "1 host env",
            f"{{host.vector.algo}} host-stepped actor, {{host.vector.num_envs}} {mode} copies",
            figure=f"host.vector.{mode}.actor_steps_per_s",
            unit="env steps/s",
            ceiling=(f"host.vector.{mode}.random_steps_per_s",),
            ceiling_name=f"{mode} env alone",
        )
        for mode in ("sync", "async")
    ],
    *[
        Spec(
            "1 host env",
            f"{n} {{host.together.{n}.algo}} host-stepped actor process{'es' * (n > 1)} "
            f"at once, {{host.together.{n}.num_envs}} copies each",
            figure=f"host.together.{n}.steps_per_s",
            unit="env steps/s",
            ceiling=("host.together.1.steps_per_s",) if n > 1 else (),
            ceiling_name="1 process",
            note=f"CPU cores used {{host.together.{n}.cores_text}} "
            f"({{host.together.{n}.cores_total}} of {{meta.cpus}}); per process "
            f"{{host.together.{n}.per_process_text}} env steps/s",
        )
        for n in HOST_TOGETHER
    ],
    # Box actions stepped in Python: MuJoCo's HalfCheetah, SAC's actor.
    Spec(
        "1 host env",
        "{host.continuous.env:s} (MuJoCo), {host.continuous.num_envs} checked copies "
        "in the actor's sync vector env, random actions in its Box (no policy)",
        figure="host.continuous.random_steps_per_s",
        unit="env steps/s",
        note="CPU per env step {host.continuous.random_cpu_us_per_step} us (the least of the "
        "slices)",
    ),
    Spec(
        "1 host env",
        "{host.continuous.algo:s} (SAC) host-stepped actor compute on it (policy per step, "
        "items, no Reverb)",
        figure="host.continuous.actor_steps_per_s",
        unit="env steps/s",
        ceiling=("host.continuous.random_steps_per_s",),
        ceiling_name="env alone",
        goal=">= 0.7x",
        note="T={host.continuous.unroll_length}; CPU per env step "
        "{host.continuous.actor_cpu_us_per_step} us",
    ),
    Spec(
        "1 host env",
        "{host.continuous.algo:s} (SAC) host-stepped actor against the env alone in CPU time "
        "(env steps per CPU second of the process, the load aside)",
        figure="host.continuous.actor_steps_per_cpu_s",
        unit="env steps/s",
        ceiling=("host.continuous.random_steps_per_cpu_s",),
        ceiling_name="env alone",
        goal=">= 0.7x",
    ),
    # 2. The real Actor alone and the real Learner alone, under local_mp.
    Spec(
        "2 stages",
        "<actor> 1 actor alone: env steps/s",
        figure="stages.<actor>.actor.env_steps_per_s",
        unit="env steps/s",
        ceiling=("ceilings.<actor>.rollout.steps_per_s",),
        ceiling_name="rollout",
        goal=">= 0.5x",
        note="blocked on Reverb {stages.<actor>.actor.blocked_share:share}, "
        "{stages.<actor>.actor.items_per_s} items/s, "
        "{stages.<actor>.actor.transitions_to_reverb_per_s} transitions/s into Reverb "
        "(insert ceiling {ceilings.<actor>.reverb.insert_steps_per_s}); "
        "CPU cores {stages.<actor>.actor.cores_text}",
    ),
    *[
        Spec(
            "2 stages",
            f"{algo} learner alone (pre-filled table): updates/s",
            figure=f"stages.{algo}.learner.updates_per_s",
            unit="updates/s",
            ceiling=(f"ceilings.{algo}.update.updates_per_s",),
            ceiling_name="update",
            goal=goal,
            note=f"waits for data {{stages.{algo}.learner.wait_share:share}}, "
            f"{{stages.{algo}.learner.samples_per_s}} samples/s; "
            f"CPU cores {{stages.{algo}.learner.cores_text}}",
        )
        for algo, goal in (("dqn", ">= 0.7x"), ("ppo", ""), *((n, ">= 0.5x") for n in LEARNERS))
    ],
    # 3. distrl's own program (make_program), 2 actors, under local_mp.
    Spec(
        "3 end to end",
        f"dqn {E2E_ACTORS} actors, SPI 1: env steps/s",
        figure="e2e.dqn.env_steps_per_s",
        unit="env steps/s",
        ceiling=("ceilings.dqn.rollout.steps_per_s", "ceilings.dqn.update.samples_per_s"),
        ceiling_name="min(rollout, update samples/s)",
        goal=">= 0.5x",
        note=_E2E_NOTE.replace("<algo>", "dqn"),
    ),
    Spec(
        "3 end to end",
        f"ppo {E2E_ACTORS} actors: learner updates/s",
        figure="e2e.ppo.updates_per_s",
        unit="updates/s",
        ceiling=("ceilings.ppo.update.updates_per_s",),
        ceiling_name="update",
        goal=">= 0.85x",
        note="{e2e.ppo.env_steps_per_s} env steps/s; " + _E2E_NOTE.replace("<algo>", "ppo"),
    ),
    Spec(
        "3 end to end",
        f"ppo {E2E_ACTORS} actors, asynchronous acting (actor.chunks_per_version=0): "
        "learner updates/s",
        figure="e2e.ppo_async.updates_per_s",
        unit="updates/s",
        ceiling=("ceilings.ppo.update.updates_per_s",),
        ceiling_name="update",
        note="{e2e.ppo_async.env_steps_per_s} env steps/s; "
        + _E2E_NOTE.replace("<algo>", "ppo_async"),
    ),
    # 4. Start-up and memory of the same end-to-end program.
    Spec(
        "4 start-up",
        "<algo>: command to the first actor insert",
        figure="e2e.<algo>.startup.first_insert",
        unit="s",
        note="first env steps counted at {e2e.<algo>.startup.first_env_steps:s}",
    ),
    Spec(
        "4 start-up",
        "<algo>: command to the first learner update",
        figure="e2e.<algo>.startup.first_update",
        unit="s",
        note="first sample at {e2e.<algo>.startup.first_sample:s}",
    ),
    Spec(
        "4 start-up",
        f"<algo>: command to every node stepping ({E2E_ACTORS} actors)",
        figure="e2e.<algo>.startup.every_node",
        unit="s",
        note="last actor's first rollout {e2e.<algo>.startup.actors:s}, "
        "first evaluation {e2e.<algo>.startup.first_eval:s}",
    ),
    Spec(
        "4 memory",
        "<algo> <role> process: peak RSS",
        figure="e2e.<algo>.memory.<role>.hwm_gb",
        unit="GB",
        note="at the window's end: RSS {e2e.<algo>.memory.<role>.rss_gb}, "
        "PSS {e2e.<algo>.memory.<role>.pss_gb}, USS {e2e.<algo>.memory.<role>.uss_gb} GB",
    ),
    Spec(
        "4 memory",
        "<algo> all node processes: PSS at the window's end",
        figure="e2e.<algo>.memory.total.pss_gb",
        unit="GB",
        note="RSS {e2e.<algo>.memory.total.rss_gb} GB over "
        "{e2e.<algo>.memory.total.count} processes",
    ),
    # 5. Time to solve: launch/train.py from its command to its exit.
    Spec(
        "5 time to solve",
        "<algo> 4x4, 2 actors, local_mp: start to exit",
        figure="solve.<algo>.wall",
        unit="s",
        goal="<= 10 s",
        note="{solve.<algo>.summary}",
        only_if="solve.<algo>.reached",
    ),
    Spec(
        "5 time to solve",
        "<algo> 4x4, 2 actors: command to first evaluation",
        figure="solve.<algo>.up_at",
        unit="s",
        goal="<= 5 s",
    ),
    Spec(
        "5 time to solve",
        "<algo> 4x4, 2 actors: command to every node stepping",
        figure="solve.<algo>.every_node",
        unit="s",
        note="first rows: learner {solve.<algo>.first_rows.learner:s}, actors "
        "{solve.<algo>.first_rows.actor_0:s} / {solve.<algo>.first_rows.actor_1:s}, "
        "evaluator {solve.<algo>.up_at:s}",
    ),
    Spec(
        "5 time to solve",
        "<algo> 4x4, 2 actors: PSS of every process (1 s after the first evaluation)",
        figure="solve.<algo>.memory.total.pss_gb",
        unit="GB",
        note="RSS {solve.<algo>.memory.total.rss_gb} GB over {solve.<algo>.memory.total.count}"
        " processes; PSS GB: {solve.<algo>.memory.pss_line}",
    ),
    Spec(
        "5 time to solve",
        "{local.config:s} seed {local.seed}, single-process as a user runs it (`python -m "
        "distrl.local --config=configs/{local.config:s}.py --config.seed={local.seed}`): to its "
        "confirmed target",
        figure="local.user.wall",
        unit="s",
        ceiling=("local.bench.wall",),
        ceiling_name="the same with benchmarks/slippery.py's settings",
        goal="<= 1.5x",
        note="user: {local.user.env_steps} env steps, command {local.user.command_wall:s}; "
        "benchmark: {local.bench.env_steps} env steps, command {local.bench.command_wall:s} "
        "(a figure only where both confirmed)",
        only_if=("local.user.solved", "local.bench.solved"),
    ),
    Spec(
        "5 single-process",
        "{local_sac.config:s} (SAC, gymnax Pendulum-v1) in distrl.local as `local.train` runs "
        "it: env steps/s",
        figure="local_sac.local.steps_per_s",
        unit="env steps/s",
        ceiling=("local_sac.fused.steps_per_s",),
        ceiling_name="one fused jitted loop of the same rollouts and updates",
        note="[T, B] {local_sac.shape:s}, {local_sac.updates_per_iteration} updates of "
        "{local_sac.batch_size} per iteration, {local_sac.iterations_per_call} iterations per "
        "call, {local_sac.calls} calls timed (evaluation every {local_sac.eval_every} "
        "iterations); first block (compile, fill): trainer {local_sac.local.first_block_s:s}, "
        "fused {local_sac.fused.first_call_s:s}",
    ),
    Spec(
        "5 time to solve",
        "<algo> 8x8 slippery (configs/<algo>_slippery8x8.py), 2 actors: to 95% of optimal "
        "({slippery.optimal.target})",
        figure="slippery.<algo>.wall",
        unit="s",
        note="{slippery.<algo>.summary}",
        only_if="slippery.<algo>.reached",
    ),
    Spec(
        "5 time to solve",
        "<algo> 8x8 slippery: exact success of the final policy / optimal",
        figure="slippery.<algo>.exact_ratio",
        unit="share",
    ),
    # 6. The Breakout-MinAtar workload, in the bench process, side by side.
    Spec(
        "6 minatar",
        "ppo_breakout single-process trainer (distrl.local's jitted call, its evaluations "
        "included) against the fused rollout+update loop (benchmarks/fused_ppo.py)",
        figure="minatar.trainer.local.env_steps_per_s",
        unit="env steps/s",
        ceiling=("minatar.trainer.fused.env_steps_per_s",),
        ceiling_name="fused loop",
        goal=">= 0.8x",
        note="without its evaluations {minatar.trainer.local_no_eval.env_steps_per_s} env steps/s",
    ),
    Spec(
        "6 minatar",
        f"ppo_breakout distributed program (benchmarks/stages.py e2e, {E2E_ACTORS} actors, "
        "local_mp: replay, learner, evaluator, actors) against the same fused loop",
        figure="minatar.distributed.env_steps_per_s",
        unit="env steps/s",
        ceiling=("minatar.trainer.fused.env_steps_per_s",),
        ceiling_name="fused loop",
        goal=">= 0.5x",
        note="{minatar.distributed.updates_per_s} updates/s, "
        + _PROGRAM_SHARES.replace("<at>", "minatar.distributed"),
    ),
    Spec(
        "6 minatar",
        "<minatar> actor rollout {minatar.actors.<minatar>.shape} against a jitted scan of "
        "gymnax's step and the same network and policy",
        figure="minatar.actors.<minatar>.rollout.env_steps_per_s",
        unit="env steps/s",
        ceiling=("minatar.actors.<minatar>.scan.env_steps_per_s",),
        ceiling_name="scan",
        goal=">= 0.8x",
        note="actor compute (items, copy to the host) "
        "{minatar.actors.<minatar>.actor_compute.env_steps_per_s} env steps/s",
    ),
    Spec(
        "6 minatar",
        "ppo_breakout PPO update {minatar.updates.ppo_breakout.batch} (agent.update, device "
        "batch) against the fused loop's update alone",
        figure="minatar.updates.ppo_breakout.agent_updates_per_s",
        unit="updates/s",
        ceiling=("minatar.updates.ppo_breakout.fused_updates_per_s",),
        ceiling_name="fused update",
        goal=">= 0.8x",
    ),
    Spec(
        "6 minatar",
        "dqn_breakout DQN update {minatar.updates.dqn_breakout.batch} (agent.update, device batch)",
        figure="minatar.updates.dqn_breakout.updates_per_s",
        unit="updates/s",
        note="{minatar.updates.dqn_breakout.samples_per_s} samples/s",
    ),
    Spec(
        "6 minatar",
        "<minatar> Reverb insert of [T, B, 10, 10, 4] items (replay.Writer, server in a "
        "child process)",
        figure="minatar.reverb.<minatar>.insert_steps_per_s",
        unit="transitions/s",
        note="{minatar.reverb.<minatar>.insert_items_per_s} items/s; read "
        "{minatar.reverb.<minatar>.read_samples_per_s} samples/s",
    ),
    Spec(
        "6 minatar",
        "<minatar> greedy evaluation ({minatar.evaluation.<minatar>.episodes} episodes "
        "through the network, initial params)",
        figure="minatar.evaluation.<minatar>.env_steps_per_s",
        unit="env steps/s",
        note="{minatar.evaluation.<minatar>.seconds_per_evaluation:s} per evaluation "
        "(mean length {minatar.evaluation.<minatar>.mean_length}); a confirmation of "
        "{minatar.evaluation.<minatar>.confirm_envs} episodes of "
        "{minatar.evaluation.<minatar>.time_limit} steps at this rate: "
        "{minatar.evaluation.<minatar>.confirmation_s:s}",
    ),
    # 7. Recurrent policies: the GRU's state carried through the actor's scan
    # and stored with each item (PPO's chunk, R2D2's sequence); the learner unrolls each
    # item from it.
    Spec(
        "7 recurrent",
        "<recurrent> actor rollout {recurrent.<recurrent>.actor.shape} (GRU state carried, "
        "reset where an episode ends) against a jitted scan of gymnax's step and the same "
        "network and policy carrying the state",
        figure="recurrent.<recurrent>.actor.rollout.env_steps_per_s",
        unit="env steps/s",
        ceiling=("recurrent.<recurrent>.actor.scan.env_steps_per_s",),
        ceiling_name="scan",
        goal=">= 0.8x",
    ),
    Spec(
        "7 recurrent",
        "<recurrent> actor compute (rollout + items with their start state (chunks or "
        "sequences) + copy to the host) against the same scan",
        figure="recurrent.<recurrent>.actor.actor_compute.env_steps_per_s",
        unit="env steps/s",
        ceiling=("recurrent.<recurrent>.actor.scan.env_steps_per_s",),
        ceiling_name="scan",
        goal=">= 0.8x",
    ),
    Spec(
        "7 recurrent",
        "<recurrent> update {recurrent.<recurrent>.update.batch} (agent.update, device "
        "batches, each sequence unrolled from its start state)",
        figure="recurrent.<recurrent>.update.updates_per_s",
        unit="updates/s",
        note="{recurrent.<recurrent>.update.samples_per_s} samples/s",
    ),
    Spec(
        "7 recurrent",
        "<recurrent> learner alone (a table its actor filled, local_mp): updates/s",
        figure="recurrent.<recurrent>.learner.updates_per_s",
        unit="updates/s",
        ceiling=("recurrent.<recurrent>.update.updates_per_s",),
        ceiling_name="update",
        goal=">= 0.5x",
        note="waits for data {recurrent.<recurrent>.learner.wait_share:share}, "
        "{recurrent.<recurrent>.learner.samples_per_s} samples/s; "
        "CPU cores {recurrent.<recurrent>.learner.cores_text}; its actor filling the table "
        "{recurrent.<recurrent>.stage_actor.env_steps_per_s} env steps/s",
    ),
]


def get(tree, path: str):
    """tree['a']['b'] for 'a.b', or None where any level is missing."""
    for key in path.split("."):
        if not isinstance(tree, dict) or tree.get(key) is None:
            return None
        tree = tree[key]
    return tree


_FIELD = re.compile(r"\{([^{}:]+)(?::(\w+))?\}")


def render(template: str, results) -> str:
    """'{a.b} items/s, {a.c:share}' with the results' values, formatted by `fmt`."""
    return _FIELD.sub(lambda m: fmt(get(results, m.group(1)), m.group(2) or ""), template)


def _error(results, path: str) -> str:
    """Why a figure is missing: the deepest 'error' on its path; 'not run' where the
    path stops before its last level; '' where only the figure itself is missing."""
    parts, found = path.split("."), ""
    for i in range(1, len(parts) + 1):
        node = get(results, ".".join(parts[:i]))
        if node is None:
            if (results.get("errors") or {}).get(parts[0]):
                return f"the section failed (bench.json 'errors'); {found}".rstrip("; ")
            return found or ("not run" if i < len(parts) else "")
        if isinstance(node, dict) and node.get("error"):
            found = node["error"]
    return found


# 8. The capacity model against the program (section `capacity`).
ROWS += [
    Spec(
        "8 capacity",
        f"{name} {n} actor{'s' * (n > 1)}: the capacity model's env steps/s for this host "
        f"({{capacity.checks.{name}-{n}.host:s}}) against the program's end to end",
        figure=f"capacity.checks.{name}-{n}.predicted",
        unit="env steps/s",
        ceiling=(f"capacity.checks.{name}-{n}.measured",),
        ceiling_name="measured",
        goal=CAPACITY_GOAL,
        note=f"bounded by {{capacity.checks.{name}-{n}.bottleneck:s}}; for all the host's "
        f"cores {{capacity.checks.{name}-{n}.all_cores:s}}; measured "
        f"{{capacity.checks.{name}-{n}.updates_per_s}} updates/s on "
        f"{{capacity.checks.{name}-{n}.cores_total}} cores "
        f"({{capacity.checks.{name}-{n}.cores_text}})",
    )
    for name in CAPACITY_CHECKS
    for n in CAPACITY_ACTORS
]


def build_row(spec: Spec, results) -> Row:
    """One row: the figure, the lowest ceiling measured, the goal, the filled-in note."""
    figure = get(results, spec.figure)
    conditions = (spec.only_if,) if isinstance(spec.only_if, str) else spec.only_if
    if not all(get(results, path) for path in conditions if path):
        figure = None
    ceilings = [c for c in (get(results, p) for p in spec.ceiling) if c]
    note = render(spec.note, results)
    if figure is None:
        note = _error(results, spec.figure) or note
    meta = results.get("meta") or {}
    return Row(
        spec.section,
        render(spec.label, results),
        figure,
        spec.unit,
        min(ceilings) if ceilings else None,
        spec.ceiling_name,
        spec.goal,
        note,
        meta.get("platform", ""),
        meta.get("device", ""),
    )


def build_rows(results) -> list:
    """Every row of the table, in order."""
    return [build_row(spec, results) for row in ROWS for spec in expand(row)]
