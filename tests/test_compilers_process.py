"""run_command: output capture, exit status, signals, and a timeout that kills the whole group."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from ciq_optuna.compilers.process import CommandNotFoundError, run_command
from ciq_optuna.errors import CiqError


def _alive(pid: int) -> bool:
    """True when ``pid`` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_captures_output_and_status():
    res = run_command(["bash", "-c", "echo out; echo err >&2; exit 3"], timeout=30)
    assert (res.returncode, res.stdout, res.stderr) == (3, "out\n", "err\n")
    assert not res.ok and not res.timed_out and res.signal is None
    assert res.duration >= 0


def test_success_is_ok():
    res = run_command([sys.executable, "-c", "print('hi')"], timeout=30)
    assert res.ok and res.stdout == "hi\n"


def test_cwd_and_env(tmp_path):
    res = run_command(
        ["bash", "-c", "pwd; echo $CIQ_TEST_VAR"],
        timeout=30,
        cwd=tmp_path,
        env={"CIQ_TEST_VAR": "x", "PATH": os.environ["PATH"]},
    )
    assert res.stdout.split() == [str(tmp_path), "x"]


def test_killed_by_signal_is_reported():
    res = run_command(["bash", "-c", "kill -SEGV $$"], timeout=30)
    assert res.returncode == -11 and res.signal == 11 and not res.timed_out


def test_timeout_kills_whole_process_group():
    # The shell starts a background grandchild, prints both pids and waits.
    start = time.monotonic()
    res = run_command(["bash", "-c", "sleep 300 & echo $$ $!; sleep 300"], timeout=1)
    assert res.timed_out and not res.ok
    assert time.monotonic() - start < 60
    pids = [int(p) for p in res.stdout.split()]
    assert len(pids) == 2
    assert not any(_alive(p) for p in pids)


def test_timeout_escalates_to_sigkill_when_sigterm_is_ignored():
    res = run_command(["bash", "-c", "trap '' TERM; sleep 300 & echo $$ $!; wait"], timeout=1)
    assert res.timed_out and res.returncode == -9
    pids = [int(p) for p in res.stdout.split()]
    assert len(pids) == 2
    assert not any(_alive(p) for p in pids)


def test_missing_executable_is_a_user_error(tmp_path):
    with pytest.raises(CommandNotFoundError, match="command not found") as info:
        run_command([str(tmp_path / "no-such-compiler")], timeout=5)
    assert isinstance(info.value, CiqError)


def test_non_executable_file_is_a_user_error(tmp_path):
    script = tmp_path / "ptxas"
    script.write_text("#!/bin/sh\n")
    with pytest.raises(CommandNotFoundError, match="not executable"):
        run_command([str(script)], timeout=5)
