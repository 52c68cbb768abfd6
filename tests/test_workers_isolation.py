"""run_isolated: results, one-line failures, group kill on timeout, threads."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from ciq_optuna.errors import CiqError
from ciq_optuna.isolation import IsolatedFailure, _orphan_excepthook, run_isolated


def double(x: int) -> int:
    return 2 * x


def fail(message: str) -> None:
    raise ValueError(message)


def segfault() -> None:
    os.kill(os.getpid(), signal.SIGSEGV)


def exit_without_result() -> None:
    os._exit(3)


def hang_with_helper(pid_file: str) -> None:
    """Start a grandchild (as a compiler would), record its pid, then hang."""
    helper = subprocess.Popen(["sleep", "300"])
    Path(pid_file).write_text(str(helper.pid))
    time.sleep(300)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_returns_the_result() -> None:
    assert run_isolated(double, 21, timeout=60) == 42


def test_exception_is_one_line_ciq_error() -> None:
    with pytest.raises(IsolatedFailure) as info:
        run_isolated(fail, "bad tile\nsecond line", timeout=60)
    assert str(info.value) == "raised ValueError: bad tile"
    assert isinstance(info.value, CiqError) and info.value.kind == "exception"


def test_segfault_is_reported_with_the_signal() -> None:
    with pytest.raises(IsolatedFailure, match=r"^crashed with signal 11 \(SIGSEGV\)$"):
        run_isolated(segfault, timeout=60)


def test_exit_without_result() -> None:
    with pytest.raises(IsolatedFailure, match="^exited with status 3 without a result$"):
        run_isolated(exit_without_result, timeout=60)


def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "helper.pid"
    with pytest.raises(IsolatedFailure, match=r"^timed out after 2.0 s$") as info:
        run_isolated(hang_with_helper, str(pid_file), timeout=2.0)
    assert info.value.kind == "timeout"
    helper = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while _alive(helper) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(helper), "the evaluation's helper process survived the timeout"


def test_safe_from_several_threads() -> None:
    results: dict[int, int] = {}

    def call(i: int) -> None:
        results[i] = run_isolated(double, i, timeout=60)

    threads = [threading.Thread(target=call, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {i: 2 * i for i in range(6)}


def _excepthook_name() -> str:
    import sys

    return sys.excepthook.__name__


def test_a_child_orphaned_at_birth_reports_one_line_not_a_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    """A worker SIGKILLed while the fork server forks its child leaves that child an empty pipe
    (EOFError in multiprocessing's spawn code): the fork server's hook says so in one line."""
    assert run_isolated(_excepthook_name, timeout=60) == "_orphan_excepthook"  # installed in the server
    _orphan_excepthook(EOFError, EOFError("Ran out of input"), None)
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1 and "worker process" in err
    try:
        raise ValueError("other errors keep their traceback")
    except ValueError as exc:
        _orphan_excepthook(ValueError, exc, exc.__traceback__)
    assert "Traceback" in capsys.readouterr().err


def test_a_child_whose_worker_is_gone_when_it_replies_exits_quietly(capfd: pytest.CaptureFixture[str]) -> None:
    """A worker SIGKILLed while its child runs: the child's reply finds the pipe closed
    (BrokenPipeError). The child ends quietly, without a traceback in the worker's log (seen as a
    'Process-2: Traceback ... conn.send' in the four-workers-killed fault test)."""
    import multiprocessing

    from ciq_optuna.isolation import _child

    ctx = multiprocessing.get_context("spawn")  # the child holds no copy of the read end
    for func, args in ((bytes, (b"x" * 100_000,)), (time.sleep, ("not a number",))):  # a result, an error
        receiver, sender = ctx.Pipe(duplex=False)
        life_r, life_w = ctx.Pipe(duplex=False)  # kept open: the lifeline does not end the child
        proc = ctx.Process(target=_child, args=(sender, life_r, func, args, {}))
        proc.start()
        sender.close()
        life_r.close()
        receiver.close()  # the worker's end is gone before the child replies
        proc.join(timeout=60)
        life_w.close()
        assert proc.exitcode == 0
        assert "Traceback" not in capfd.readouterr().err
