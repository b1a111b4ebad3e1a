"""Checkpoints that can always be resumed: sealed replay checkpoints, matched pairs.

Real Reverb servers write real checkpoints through the learner's own `Saver` (a
learner checkpoint, then Reverb's, in one round); files are then cut
(`os.truncate`) or overwritten as a full disk, a killed copy or a bad sector would
leave them, and the launcher's `prepare` chooses what a resume continues from.
"""

import contextlib
import functools
import json
import os
import pathlib
import shutil
import subprocess
import time

import jax
import numpy as np
import pytest
import reverb
from conftest import load_config

from distrl import checkpoints, replay
from distrl import experiment as experiment_lib
from distrl.nodes import lifecycle
from distrl.pipelines import transitions
from distrl.program import launcher as program
from distrl.program import topology
from distrl.records import rundir

_ROUNDS = 3


def _config(run_dir):
    config = load_config("dqn")
    config.run_dir = str(run_dir)
    return config


def _write_items(client, config, count: int, version: int) -> None:
    """`count` items of random transitions acted with params `version`."""
    item = (
        experiment_lib.Experiment(config)
        .pipeline.example_item(config, experiment_lib.Experiment(config).env)
        .data
    )
    rng = np.random.default_rng(version)
    items = jax.tree.map(lambda x: rng.random((count, *x.shape)).astype(x.dtype), item)
    replay.Writer(client, lambda: False).write_steps(items, version=version)


def _table(config):
    """The DQN config's table, but with inserts never held back for samples (no
    learner samples here)."""
    max_items, _ = transitions.replay_items(config)
    signature = experiment_lib.Experiment(config).pipeline.signature(
        config, experiment_lib.Experiment(config).env
    )
    return reverb.Table(
        replay.TABLE,
        sampler=reverb.selectors.Uniform(),
        remover=reverb.selectors.Fifo(),
        max_size=max_items,
        rate_limiter=reverb.rate_limiters.MinSize(1),
        signature=signature,
    )


@pytest.fixture(scope="module")
def rounds(tmp_path_factory):
    """A run directory with 3 checkpoint rounds (learner versions 10, 20, 30), each a
    learner checkpoint and the replay checkpoint sealed with it, written by a real
    Reverb server while items of the round's version arrive."""
    run_dir = tmp_path_factory.mktemp("pairs") / "run"
    config = _config(run_dir)
    agent = experiment_lib.Experiment(config).agent
    state = agent.init(jax.random.PRNGKey(0))
    rundir.write_config(config, str(run_dir))
    checkpointer = replay.make_checkpointer(checkpoints.replay.reverb_dir(str(run_dir)))
    server = reverb.Server([_table(config)], checkpointer=checkpointer)
    try:
        client = reverb.Client(f"localhost:{server.port}")
        saver = checkpoints.learner.Saver(
            checkpoints.learner.directory(str(run_dir)),
            0.0,
            "dqn",
            functools.partial(
                replay.checkpoint,
                replay.Connection(client, lambda: False, "the learner"),
                keep_in=str(run_dir),
                keep=_ROUNDS,
            ),
            keep=_ROUNDS,
        )
        for i in range(1, _ROUNDS + 1):
            _write_items(client, config, 20, version=10 * i - 1)
            saver.save(state, 10 * i, {"env_steps": 100.0 * i}, elapsed=float(i))
    finally:
        server.stop()
    return run_dir


def _copy(rounds, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(rounds, copy)
    return copy


def _learner_files(run_dir):
    """Learner manifests, oldest first."""
    paths = pathlib.Path(checkpoints.learner.directory(str(run_dir))).glob("state-*.json")
    return sorted(paths, key=checkpoints.store.written_ms)


def _replay_files(run_dir):
    """Kept replay checkpoints, oldest first."""
    return sorted(pathlib.Path(checkpoints.replay.kept_dir(str(run_dir))).iterdir())


def _resume(run_dir):
    """What a resume of `run_dir` continues from: the launcher's restored manifest."""
    with contextlib.ExitStack() as stack:
        _, _, restored = program.prepare(_config(run_dir), True, stack)
    return restored


def _state_file(manifest_path) -> str:
    return manifest_path.name[: -len(".json")] + ".npz"


def test_each_replay_checkpoint_is_sealed_with_its_rounds_learner_checkpoint(rounds):
    learners, replays = _learner_files(rounds), _replay_files(rounds)
    assert len(learners) == len(replays) == _ROUNDS, (learners, replays)
    for manifest, kept in zip(learners, replays, strict=True):
        seal = json.loads((kept / checkpoints.replay.SEAL).read_text())
        assert seal["learner_checkpoint"] == _state_file(manifest)
        names = {"tables.tfrecord", "chunks.tfrecord", "items.tfrecord", "DONE"}
        assert set(seal["files"]) == names
        for name, want in seal["files"].items():
            assert checkpoints.replay.fingerprint(str(kept / name)) == want
        assert checkpoints.replay.problem(str(kept)) is None


@pytest.mark.parametrize("name", ["tables.tfrecord", "chunks.tfrecord", "items.tfrecord"])
def test_a_replay_file_cut_by_its_last_bytes_or_overwritten_is_refused(rounds, tmp_path, name):
    """TFRecord's own CRCs let a ZLIB file cut in its last bytes read whole (issue 11)."""
    kept = _replay_files(_copy(rounds, tmp_path))[-1]
    file = kept / name
    data = file.read_bytes()
    for cut in (1, 2, 8):
        file.write_bytes(data[:-cut])
        why = checkpoints.replay.problem(str(kept))
        assert why == f"{name} is {len(data) - cut} bytes, {len(data)} when sealed (cut short?)"
    garbled = bytearray(data)
    for at in (len(data) - 1, len(data) // 2, 0):
        garbled[at] ^= 0x01
        file.write_bytes(bytes(garbled))
        assert checkpoints.replay.problem(str(kept)) == (
            f"{name} does not match its SHA-256 in distrl.json (corrupt)"
        )
        garbled[at] ^= 0x01
    file.write_bytes(data + b"\0")
    assert "bytes, " in checkpoints.replay.problem(str(kept))
    file.write_bytes(data)
    assert checkpoints.replay.problem(str(kept)) is None


def test_a_replay_checkpoint_without_a_whole_seal_or_done_is_refused(rounds, tmp_path):
    kept = _replay_files(_copy(rounds, tmp_path))[-1]
    seal = kept / checkpoints.replay.SEAL
    text = seal.read_text()
    seal.write_text(text[:-3])
    assert checkpoints.replay.problem(str(kept)).startswith("distrl.json is unreadable")
    seal.write_text(json.dumps({"format": "something else"}))
    assert "is not a distrl replay seal" in checkpoints.replay.problem(str(kept))
    # A changed character that still parses (here the round it pairs with).
    seal.write_text(text.replace('"learner_checkpoint": "state-', '"learner_checkpoint": "stat-'))
    assert checkpoints.replay.problem(str(kept)) == (
        "distrl.json is corrupt: its content does not match its seal_sha256"
    )
    seal.unlink()
    assert checkpoints.replay.problem(str(kept)).startswith("not sealed (no distrl.json)")
    seal.write_text(text)
    (kept / "items.tfrecord").unlink()
    assert checkpoints.replay.problem(str(kept)) == "items.tfrecord is missing"
    (kept / "DONE").unlink()
    assert "no DONE marker" in checkpoints.replay.problem(str(kept))


def test_a_resume_takes_the_newest_pair_written_in_one_round(rounds, tmp_path, capfd):
    run_dir = _copy(rounds, tmp_path)
    learners, replays = _learner_files(run_dir), _replay_files(run_dir)
    restored = _resume(run_dir)
    assert restored["version"] == 30
    assert restored["replay_checkpoint"] == str(replays[-1])
    err = capfd.readouterr().err
    assert (
        f"distrl: resuming from learner checkpoint {_state_file(learners[-1])} (version 30) "
        f"and replay checkpoint {replays[-1].name}: written in the same round\n"
    ) == err, err


def test_a_corrupt_newest_learner_checkpoint_pairs_the_older_one_with_its_own_replay(
    rounds, tmp_path, capfd
):
    """Not the newest replay checkpoint: its items may be acted with params (version
    30's round) that the resumed learner (version 20) never had."""
    run_dir = _copy(rounds, tmp_path)
    learners, replays = _learner_files(run_dir), _replay_files(run_dir)
    npz = learners[-1].with_suffix(".npz")
    os.truncate(npz, npz.stat().st_size - 1)
    restored = _resume(run_dir)
    assert restored["version"] == 20
    assert restored["replay_checkpoint"] == str(replays[-2])
    lines = capfd.readouterr().err.splitlines()
    assert lines[0].startswith(f"distrl: learner checkpoint skipped: checkpoint {npz} is corrupt")
    assert lines[1] == (
        f"distrl: replay checkpoint skipped: {replays[-1]}: newer than learner checkpoint "
        f"{_state_file(learners[-2])} (its round is {_state_file(learners[-1])}): its items "
        "may be acted with params that learner never had"
    )
    assert lines[2] == (
        f"distrl: resuming from learner checkpoint {_state_file(learners[-2])} (version 20) "
        f"and replay checkpoint {replays[-2].name}: written in the same round"
    )
    assert len(lines) == 3, lines


def test_a_cut_newest_replay_checkpoint_pairs_the_newest_learner_with_an_older_one(
    rounds, tmp_path, capfd
):
    """The learner's updates are kept: an older replay only lacks the newest items."""
    run_dir = _copy(rounds, tmp_path)
    learners, replays = _learner_files(run_dir), _replay_files(run_dir)
    items = replays[-1] / "items.tfrecord"
    size = items.stat().st_size
    os.truncate(items, size - 4)
    restored = _resume(run_dir)
    assert restored["version"] == 30
    assert restored["replay_checkpoint"] == str(replays[-2])
    lines = capfd.readouterr().err.splitlines()
    why = f"items.tfrecord is {size - 4} bytes, {size} when sealed (cut short?)"
    assert lines == [
        f"distrl: replay checkpoint skipped: {replays[-1]}: {why}",
        f"distrl: resuming from learner checkpoint {_state_file(learners[-1])} (version 30) "
        f"and replay checkpoint {replays[-2].name} of an older round "
        f"({_state_file(learners[-2])}), the newest usable one not newer than the learner: "
        f"its own round's is unusable ({why}); items acted after it are lost",
    ]


def test_no_usable_replay_checkpoint_is_refused_before_anything_starts(rounds, tmp_path):
    run_dir = _copy(rounds, tmp_path)
    replays = _replay_files(run_dir)
    for kept in replays:
        chunks = kept / "chunks.tfrecord"
        os.truncate(chunks, chunks.stat().st_size - 1)
    with pytest.raises(checkpoints.store.CheckpointError) as info:
        _resume(run_dir)
    message = str(info.value)
    assert message.startswith(
        f"no replay checkpoint of {run_dir} can be loaded with learner checkpoint "
        f"{_state_file(_learner_files(run_dir)[-1])}; the newest, {replays[-1]}: "
        "chunks.tfrecord is "
    )
    assert "(and 2 older)" in message
    # Nothing was moved: Reverb's own directory still holds its newest checkpoint.
    assert os.listdir(checkpoints.replay.reverb_dir(str(run_dir)))


def test_a_checkpoint_reverb_wrote_but_the_learner_never_sealed_is_kept_not_loaded(
    rounds, tmp_path, capfd
):
    """A learner killed between Reverb's checkpoint and its seal: Reverb's directory
    holds an unsealed checkpoint newer than every kept one."""
    run_dir = _copy(rounds, tmp_path)
    newest = _replay_files(run_dir)[-1]
    unsealed = pathlib.Path(checkpoints.replay.reverb_dir(str(run_dir))) / "9999-unsealed"
    shutil.copytree(newest, unsealed)
    (unsealed / checkpoints.replay.SEAL).unlink()
    restored = _resume(run_dir)
    assert restored["replay_checkpoint"] == str(newest)
    err = capfd.readouterr().err
    assert f"replay checkpoint skipped: {unsealed}: not sealed (no distrl.json)" in err
    kept = pathlib.Path(checkpoints.replay.kept_dir(str(run_dir))) / unsealed.name
    assert kept.is_dir() and not (kept / checkpoints.replay.SEAL).exists()
    assert os.listdir(checkpoints.replay.reverb_dir(str(run_dir))) == []


def test_keep_counts_sealed_checkpoints_and_drops_older_unsealed_ones(rounds, tmp_path):
    run_dir = _copy(rounds, tmp_path)
    oldest, middle, newest = _replay_files(run_dir)
    unsealed = oldest.with_name(oldest.name + "-unsealed")  # between oldest and middle
    shutil.copytree(oldest, unsealed)
    (unsealed / checkpoints.replay.SEAL).unlink()
    source = tmp_path / "reverb" / (newest.name + "-next")
    shutil.copytree(newest, source)
    (source / checkpoints.replay.SEAL).unlink()
    target = checkpoints.replay.keep(str(source), str(run_dir), 2, "state-0000000040-9.npz")
    assert checkpoints.replay.problem(target) is None
    assert _replay_files(run_dir) == [newest, pathlib.Path(target)]


@pytest.mark.parametrize("cut", [2, 9, 100])
def test_a_learner_manifest_cut_or_changed_is_refused(rounds, tmp_path, cut):
    run_dir = _copy(rounds, tmp_path)
    ckpt_dir = checkpoints.learner.directory(str(run_dir))
    manifest = _learner_files(run_dir)[-1]
    text = manifest.read_text()
    manifest.write_text(text[:-cut])
    with pytest.raises(checkpoints.store.CheckpointError, match="unreadable"):
        checkpoints.store.read_manifest(ckpt_dir)
    config = _config(run_dir)
    restored = checkpoints.learner.verify(
        str(run_dir), config.algorithm, experiment_lib.Experiment(config).agent
    )
    assert restored["version"] == 20 and "is unreadable" in restored["skipped"][0]
    # A changed digit still parses: the manifest's own checksum refuses it.
    manifest.write_text(text.replace('"version": 30', '"version": 31'))
    with pytest.raises(
        checkpoints.store.CheckpointError, match="does not match its manifest_sha256"
    ):
        checkpoints.store.read_manifest(ckpt_dir)
    assert _resume(run_dir)["version"] == 20  # the resume falls back to the one before


def _linked_copy(rounds, tmp_path):
    """A copy of the run directory with its hard links as the learner's `keep` made
    them (Reverb's newest checkpoint and its kept twin share their files): damage to
    one is damage to both, as in a live run."""
    copy = tmp_path / "run"
    subprocess.run(["cp", "-a", str(rounds), str(copy)], check=True)
    return copy


def _replay_start(run_dir, attempt: int, restored=None, monkeypatch=None) -> float:
    """Items in the table of the program's own replay node (its tables and checkpointer,
    as `make_program` builds them) when its process starts as attempt `attempt` (0:
    the launch, n: the n-th restart), served by a real Reverb server."""
    monkeypatch.setenv(lifecycle.ATTEMPT_ENV, str(attempt))
    config = _config(run_dir)
    program_ = topology.make_program(
        experiment_lib.make(config), str(run_dir), time.time(), restored
    )
    (node,) = program_.groups["replay"]
    server = reverb.Server(node._priority_tables_fn(), checkpointer=node._checkpoint_ctor())
    try:
        return replay.table_stats(reverb.Client(f"localhost:{server.port}"))["size"]
    finally:
        server.stop()


def _restart_lines(caplog):
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("replay restarted")]


def test_a_restarted_replay_loads_the_newest_verified_checkpoint(
    rounds, tmp_path, monkeypatch, caplog
):
    """Also with a write Reverb never finished (killed while checkpointing: no DONE)."""
    run_dir = _linked_copy(rounds, tmp_path)
    learners, replays = _learner_files(run_dir), _replay_files(run_dir)
    unfinished = pathlib.Path(checkpoints.replay.reverb_dir(str(run_dir))) / "9999-unfinished"
    unfinished.mkdir()
    (unfinished / "chunks.tfrecord").write_bytes(b"half")
    with caplog.at_level("INFO"):
        assert _replay_start(run_dir, 1, monkeypatch=monkeypatch) == 20 * _ROUNDS
    assert _restart_lines(caplog) == [
        f"replay restarted from checkpoint {replays[-1]} (round {_state_file(learners[-1])}), "
        "the newest usable"
    ]
    assert os.listdir(checkpoints.replay.reverb_dir(str(run_dir))) == []  # Reverb loads the choice
    assert _replay_files(run_dir) == replays


def test_a_restarted_replay_skips_a_newest_checkpoint_cut_by_a_byte(
    rounds, tmp_path, monkeypatch, caplog
):
    """Reverb alone would load its own copy of the newest, which is the same cut file."""
    run_dir = _linked_copy(rounds, tmp_path)
    learners, replays = _learner_files(run_dir), _replay_files(run_dir)
    items = replays[-1] / "items.tfrecord"
    (reverbs,) = pathlib.Path(checkpoints.replay.reverb_dir(str(run_dir))).iterdir()
    assert (reverbs / items.name).samefile(items)
    size = items.stat().st_size
    os.truncate(items, size - 1)
    with caplog.at_level("WARNING"):
        assert _replay_start(run_dir, 1, monkeypatch=monkeypatch) == 20 * (_ROUNDS - 1)
    assert _restart_lines(caplog) == [
        f"replay restarted from checkpoint {replays[-2]} (round {_state_file(learners[-2])}), "
        f"the newest usable; skipped: {replays[-1]}: items.tfrecord is {size - 1} bytes, "
        f"{size} when sealed (cut short?)"
    ]
    # The next restart does the same: nothing it skipped was deleted or loaded.
    caplog.clear()
    with caplog.at_level("WARNING"):
        assert _replay_start(run_dir, 2, monkeypatch=monkeypatch) == 20 * (_ROUNDS - 1)
    assert len(_restart_lines(caplog)) == 1 and _replay_files(run_dir) == replays


def test_a_restarted_replay_with_no_usable_checkpoint_starts_empty_with_a_warning(
    rounds, tmp_path, monkeypatch, caplog
):
    run_dir = _linked_copy(rounds, tmp_path)
    replays = _replay_files(run_dir)
    os.truncate(replays[0] / "chunks.tfrecord", 3)
    (replays[1] / "tables.tfrecord").write_bytes(b"garbage")
    (replays[2] / checkpoints.replay.SEAL).write_text("{")
    with caplog.at_level("WARNING"):
        assert _replay_start(run_dir, 1, monkeypatch=monkeypatch) == 0
    (line,) = _restart_lines(caplog)
    assert line.startswith(
        "replay restarted with an empty table: no usable checkpoint; skipped: "
        f"{replays[2]}: distrl.json is unreadable"
    )
    assert f"; {replays[1]}: tables.tfrecord is 7 bytes" in line
    assert f"; {replays[0]}: chunks.tfrecord is 3 bytes" in line
    assert [r.levelname for r in caplog.records if r.getMessage() == line] == ["WARNING"]
    # A run restarted before its first checkpoint round.
    empty = tmp_path / "fresh"
    caplog.clear()
    with caplog.at_level("WARNING"):
        assert _replay_start(empty, 1, monkeypatch=monkeypatch) == 0
    assert _restart_lines(caplog) == [
        "replay restarted with an empty table: the run has no checkpoint yet"
    ]


def test_a_resumed_replay_loads_the_launchers_choice_and_its_restart_the_newest_usable(
    rounds, tmp_path, monkeypatch, capfd
):
    """The launch of a resume loads the pair's replay checkpoint (here the one before
    the cut newest); a restart afterwards loads the newest usable one then."""
    run_dir = _linked_copy(rounds, tmp_path)
    replays = _replay_files(run_dir)
    os.truncate(replays[-1] / "items.tfrecord", 10)
    restored = _resume(run_dir)
    assert restored["replay_checkpoint"] == str(replays[-2])
    assert _replay_start(run_dir, 0, restored, monkeypatch) == 20 * (_ROUNDS - 1)
    os.truncate(replays[-2] / "items.tfrecord", 10)
    assert _replay_start(run_dir, 1, restored, monkeypatch) == 20 * (_ROUNDS - 2)
