"""The rows of the benchmark table, one function per section, from run.py's results.

Every ratio divides two figures measured in the same run. Sections that did not
run (or failed) give rows with no figure, so the table always has the same shape.
"""

from benchmarks.report import (
    ACTOR_VS_ROLLOUT,
    DQN_E2E_VS_MIN,
    DQN_TO_REVERB,
    E2E_VS_PEER,
    PPO_E2E_VS_LEARNER,
    SOLVE_LOCAL_S,
    SOLVE_MP_S,
    Row,
    fmt,
)


def _get(tree, *path):
    """tree[path[0]][path[1]]..., or None where any level is missing."""
    for key in path:
        if not isinstance(tree, dict) or tree.get(key) is None:
            return None
        tree = tree[key]
    return tree


def ceiling_rows(r) -> list:
    """Section 1: each stage's work alone."""
    rows = []
    for algo in ("dqn", "ppo"):
        c = _get(r, "ceilings", algo) or {}
        shape = _get(c, "rollout", "shape") or ""
        rows += [
            Row(
                "1 ceilings",
                f"{algo} rollout {shape} (jitted env+policy, no I/O)",
                _get(c, "rollout", "steps_per_s"),
                "env steps/s",
            ),
            Row(
                "1 ceilings",
                f"{algo} actor compute (rollout + items + device_get)",
                _get(c, "actor_compute", "steps_per_s"),
                "env steps/s",
                _get(c, "rollout", "steps_per_s"),
                "rollout",
            ),
            Row(
                "1 ceilings",
                f"{algo} update {_get(c, 'update', 'batch') or ''} (device batches)",
                _get(c, "update", "updates_per_s"),
                "updates/s",
                note=f"{fmt(_get(c, 'update', 'samples_per_s'))} samples/s",
            ),
            Row(
                "1 ceilings",
                f"{algo} Reverb insert (replay.Writer, server in another process)",
                _get(c, "reverb", "insert_steps_per_s"),
                "transitions/s",
                note=f"{fmt(_get(c, 'reverb', 'insert_items_per_s'))} items/s",
            ),
            Row(
                "1 ceilings",
                f"{algo} Reverb read (replay.make_dataset + to_learner_batch)",
                _get(c, "reverb", "read_samples_per_s"),
                "samples/s",
                note=f"{fmt(_get(c, 'reverb', 'read_batches_per_s'))} batches/s",
            ),
        ]
    return rows


def stage_rows(r) -> list:
    """Section 2a: one real actor alone, the real learner alone (local_mp)."""
    rows = []
    for algo in ("dqn", "ppo"):
        a, lrn = _get(r, "stages", algo, "actor") or {}, _get(r, "stages", algo, "learner") or {}
        err = _get(r, "stages", algo, "error") or a.get("error") or lrn.get("error")
        c = _get(r, "ceilings", algo) or {}
        # The stage's work done one part after the other, at each part's ceiling.
        actor_serial = _serial(
            _get(c, "actor_compute", "steps_per_s"), _get(c, "reverb", "insert_steps_per_s")
        )
        learner_serial = _serial(
            _get(c, "reverb", "read_batches_per_s"), _get(c, "update", "updates_per_s")
        )
        rows.append(
            Row(
                "2 stages",
                f"{algo} 1 actor alone: env steps/s",
                a.get("env_steps_per_s"),
                "env steps/s",
                _get(r, "ceilings", algo, "rollout", "steps_per_s"),
                "rollout",
                "ratio>=",
                ACTOR_VS_ROLLOUT,
                err
                or f"blocked on Reverb {fmt(a.get('blocked_share'), 'share')}, "
                f"{fmt(a.get('items_per_s'))} items/s; compute then insert, serially at "
                f"their ceilings: {fmt(actor_serial)}/s",
            )
        )
        rows.append(
            Row(
                "2 stages",
                f"{algo} 1 actor alone: transitions into Reverb/s",
                a.get("transitions_to_reverb_per_s"),
                "transitions/s",
                _get(r, "ceilings", algo, "reverb", "insert_steps_per_s"),
                "Reverb insert",
                *(("figure>=", DQN_TO_REVERB) if algo == "dqn" else ("", None)),
            )
        )
        rows.append(
            Row(
                "2 stages",
                f"{algo} learner alone (pre-filled table): updates/s",
                lrn.get("updates_per_s"),
                "updates/s",
                _get(r, "ceilings", algo, "update", "updates_per_s"),
                "update",
                note=err
                or f"waits for data {fmt(lrn.get('wait_share'), 'share')}, "
                f"{fmt(lrn.get('samples_per_s'))} samples/s; read then update, serially at "
                f"their ceilings: {fmt(learner_serial)}/s",
            )
        )
    return rows


def _serial(*rates):
    """The rate of doing one unit of each part in turn: 1 / sum(1 / rate)."""
    if not all(rates):
        return None
    return 1.0 / sum(1.0 / x for x in rates)


def e2e_rows(r) -> list:
    """Section 2b: the whole program under local_mp, 1 and 2 actors."""
    rows = []
    for key, e in sorted((_get(r, "e2e") or {}).items()):
        algo, actors = key.split("-")
        note = e.get("error") or (
            f"{fmt(e.get('updates_per_s'))} upd/s, {fmt(e.get('samples_per_s'))} samples/s, "
            f"SPI {fmt(e.get('samples_per_insert'))}, lag {fmt(e.get('mean_version_lag'))}, "
            f"learner waits {fmt(e.get('wait_share'), 'share')}, "
            f"actors blocked {fmt(e.get('actor_blocked_share'), 'share')}"
        )
        if algo == "dqn":
            ceilings = [
                _get(r, "ceilings", "dqn", "rollout", "steps_per_s"),
                _get(r, "ceilings", "dqn", "update", "samples_per_s"),
            ]
            ceiling = min(c for c in ceilings if c) if any(ceilings) else None
            rows.append(
                Row(
                    "2 end to end",
                    f"dqn {actors} actor(s), SPI 1: env steps/s",
                    e.get("env_steps_per_s"),
                    "env steps/s",
                    ceiling,
                    "min(rollout, update samples/s)",
                    "ratio>=",
                    DQN_E2E_VS_MIN,
                    note,
                )
            )
        else:
            rows.append(
                Row(
                    "2 end to end",
                    f"ppo {actors} actor(s): learner updates/s",
                    e.get("updates_per_s"),
                    "updates/s",
                    _get(r, "ceilings", "ppo", "update", "updates_per_s"),
                    "update",
                    *(("ratio>=", PPO_E2E_VS_LEARNER) if actors == "2" else ("", None)),
                    f"{fmt(e.get('env_steps_per_s'))} env steps/s; " + note,
                )
            )
    return rows


def solve_rows(r) -> list:
    """Section 3: time to solve (4x4) and the slippery 8x8 beside it."""
    rows = []
    for algo in ("dqn", "ppo"):
        s = _get(r, "solve", f"{algo}-mp") or {}
        rows.append(
            Row(
                "3 time to solve",
                f"{algo} 4x4, 2 actors, local_mp: start to exit",
                s.get("wall") if s.get("reached") else None,
                "s",
                None,
                "",
                "figure<=",
                SOLVE_MP_S,
                _solve_note(s),
            )
        )
    for algo in ("dqn", "ppo"):
        s = _get(r, "solve", f"{algo}-local") or {}
        rows.append(
            Row(
                "3 time to solve",
                f"{algo} 4x4, single process (distrl.local), incl. compile",
                s.get("train_wall") if s.get("reached") else None,
                "s",
                None,
                "",
                "figure<=",
                SOLVE_LOCAL_S,
                s.get("error")
                or f"process {fmt(s.get('wall'), 's')} with imports, "
                f"compile {fmt(s.get('compile'), 's')}, {fmt(s.get('env_steps'))} env steps",
            )
        )
    s = _get(r, "solve", "dqn-mt") or {}
    rows.append(
        Row(
            "3 time to solve",
            "dqn 4x4, 2 actors, test_mt (same program, nodes as threads of 1 process)",
            s.get("wall") if s.get("reached") else None,
            "s",
            note=_solve_note(s),
        )
    )
    p = _get(r, "peer") or {}
    rows.append(
        Row(
            "3 time to solve",
            "peer: plain-Python DQN loop, 4x4, start to exit",
            p.get("wall") if p.get("reached") else None,
            "s",
            note=_solve_note(p),
        )
    )
    opt = _get(r, "slippery", "optimal") or {}
    for algo in ("dqn", "ppo"):
        s = _get(r, "slippery", algo) or {}
        rows.append(
            Row(
                "3 time to solve",
                f"{algo} 8x8 slippery, 2 actors: to 95% of optimal ({fmt(_get(opt, 'target'))})",
                s.get("wall") if s.get("reached") else None,
                "s",
                note=_solve_note(s),
            )
        )
    return rows


def _solve_note(s) -> str:
    if not s:
        return "not run"
    if s.get("error"):
        return s["error"]
    steps = f"{fmt(s.get('env_steps'))} env steps"
    if s.get("result_at"):  # distributed runs: where the wall time went
        steps += (
            f"; first evaluation at {fmt(s.get('up_at'), 's')}, verdict at "
            f"{fmt(s['result_at'], 's')}, exit {fmt(s['wall'] - s['result_at'], 's')} later"
        )
    if s.get("reached"):
        return steps
    return (
        f"not reached in {fmt(s.get('wall'), 's')} (stop: {s.get('stop_reason')}, "
        f"success {fmt(s.get('success_rate'))}); {steps}"
    )


def peer_rows(r) -> list:
    """Section 4: the whole program against the plain-Python loop."""
    peer = _get(r, "peer", "env_steps_per_s")
    rows = [
        Row(
            "4 peers",
            "peer: plain-Python DQN loop (1 env, list buffer, update/step)",
            peer,
            "env steps/s",
        )
    ]
    for algo in ("dqn", "ppo"):
        rows.append(
            Row(
                "4 peers",
                f"{algo} whole program, 2 actors vs the peer",
                _get(r, "e2e", f"{algo}-2", "env_steps_per_s"),
                "env steps/s",
                peer,
                "peer env steps/s",
                "ratio>=",
                E2E_VS_PEER,
            )
        )
    mp, local = _get(r, "solve", "dqn-mp"), _get(r, "solve", "dqn-local")
    for name, s in (("local_mp", mp), ("single process", local)):
        solved = s and s.get("reached") and _get(r, "peer", "reached")
        rows.append(
            Row(
                "4 peers",
                f"peer time to solve / dqn {name} time to solve",
                _get(r, "peer", "wall") if solved else None,
                "s",
                s.get("wall") if solved else None,
                "dqn wall",
            )
        )
    return rows


def learner_rows(r) -> list:
    """Section 5: the pure-JAX learner sweep (benchmarks/learner.py) on this host."""
    return [
        Row(
            "5 learner sweep",
            f"{x['algo']} update {x['batch']} on {x['device']}",
            x["updates_per_s"],
            "updates/s",
            note=f"{fmt(x['samples_per_s'])} samples/s",
        )
        for x in _get(r, "learner_sweep", "rows") or []
    ]


def build_rows(results) -> list:
    """Every row of the table, in order."""
    return (
        ceiling_rows(results)
        + stage_rows(results)
        + e2e_rows(results)
        + solve_rows(results)
        + peer_rows(results)
        + learner_rows(results)
    )
