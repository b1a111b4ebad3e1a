"""distrl.program.ports: a port claimed by one launcher is never given to another."""

import itertools
import subprocess
import sys
import textwrap

import pytest

from distrl.program import ports


def _cycling(*candidates):
    """A picker as portpicker's, but from a few ports, so that claims must collide."""
    return itertools.cycle(candidates).__next__


def test_two_launchers_drawing_the_same_ports_never_share_one(tmp_path):
    first = ports.Claims(pick=_cycling(15001, 15002, 15003), directory=str(tmp_path))
    second = ports.Claims(pick=_cycling(15001, 15002, 15003), directory=str(tmp_path))
    got_first = {first.port(), first.port()}
    got_second = second.port()
    assert got_first == {15001, 15002}
    assert got_second == 15003
    with pytest.raises(RuntimeError, match="no free port left unclaimed"):
        second.port()


def test_released_ports_can_be_claimed_again(tmp_path):
    first = ports.Claims(pick=_cycling(15001), directory=str(tmp_path))
    assert first.port() == 15001
    first.release()
    assert ports.Claims(pick=_cycling(15001), directory=str(tmp_path)).port() == 15001


def test_a_killed_launchers_claims_are_free_at_once(tmp_path):
    """SIGKILL leaves nothing to clean up: the kernel drops the holder's locks."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                f"""
                import sys, time
                from distrl.program import ports
                claims = ports.Claims(pick=lambda: 15001, directory={str(tmp_path)!r})
                print(claims.port(), flush=True)
                time.sleep(600)
                """
            ),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "15001"
        taken = ports.Claims(pick=_cycling(15001), directory=str(tmp_path))
        with pytest.raises(RuntimeError):
            taken.port()
        holder.kill()
        holder.wait(timeout=30)
        assert taken.port() == 15001
    finally:
        holder.kill()
        holder.wait(timeout=30)
        holder.stdout.close()


def test_claims_are_machine_wide_not_per_tmpdir(monkeypatch, tmp_path):
    before = ports.claims_dir()
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    assert ports.claims_dir() == before


def test_server_ports_are_never_ones_the_kernel_gives_connections():
    """A client socket takes its port from the ephemeral range; a node's server port
    drawn there could be taken first (seen in CI: the counter never started)."""
    low, high = ports.ephemeral_range()
    drawn = [ports.pick_server_port() for _ in range(200)]
    assert all(not low <= p <= high and p >= 20000 for p in drawn), drawn
    assert len(set(drawn)) > 150  # spread over the range, not one port
