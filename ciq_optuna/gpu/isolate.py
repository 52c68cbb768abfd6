"""Run one evaluation in a fresh process, so that a crash or a hang fails a trial, not the worker.

A kernel that reads out of bounds leaves the CUDA context unusable (``cudaErrorIllegalAddress``
is sticky) and may even kill the process; a deadlocked kernel never returns. Each evaluation
therefore runs in a new process (``spawn``: no CUDA state inherited from the parent) that starts
its own session; on timeout the whole process group is killed. The function and its arguments
must be picklable (module-level functions; scripts need an ``if __name__ == "__main__"`` guard).
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import traceback
from collections.abc import Callable
from typing import Any, TypeVar

from ciq_optuna.errors import CiqError
from ciq_optuna.gpu.errors import EvaluationCrashed

T = TypeVar("T")

#: Seconds granted to a finished child to exit before it is killed.
EXIT_GRACE_S = 5.0


def _child(conn: Any, fn: Callable[..., Any], args: tuple, kwargs: dict) -> None:
    os.setsid()
    try:
        result = fn(*args, **kwargs)
    except BaseException as exc:
        tb = traceback.format_exc()
        try:
            conn.send(("error", exc, tb))
        except Exception:
            conn.send(("error", None, f"{type(exc).__name__}: {exc}\n{tb}"))
    else:
        conn.send(("ok", result, ""))
    conn.close()


def _kill_group(pid: int) -> None:
    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _last_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1].strip() if lines else ""


def run_isolated(fn: Callable[..., T], *args: Any, timeout: float, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` in a fresh process; its result, or its exception re-raised here.

    A :class:`~ciq_optuna.errors.CiqError` raised in the child is re-raised as is; any other
    exception becomes :class:`EvaluationCrashed` with the exception's last line. Death by a signal
    or a timeout (the process group is then SIGKILLed) also raise :class:`EvaluationCrashed`.
    """
    ctx = multiprocessing.get_context("spawn")
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(send, fn, args, kwargs), daemon=False)
    proc.start()
    send.close()
    try:
        if not recv.poll(timeout):
            _kill_group(proc.pid)
            proc.join()
            raise EvaluationCrashed(f"evaluation timed out after {timeout:g} s (process group killed)")
        try:
            status, value, tb = recv.recv()
        except (EOFError, OSError):
            proc.join(EXIT_GRACE_S)
            code = proc.exitcode
            if code is not None and code < 0:
                name = signal.Signals(-code).name
                raise EvaluationCrashed(f"evaluation process killed by {name}") from None
            raise EvaluationCrashed(
                f"evaluation process exited with status {code} without a result"
            ) from None
    finally:
        recv.close()
        proc.join(EXIT_GRACE_S)
        if proc.is_alive():
            _kill_group(proc.pid)
            proc.join()
    if status == "ok":
        return value
    if isinstance(value, CiqError):
        raise value
    if value is None:
        raise EvaluationCrashed(f"evaluation failed: {_last_line(tb)}")
    raise EvaluationCrashed(f"evaluation failed: {type(value).__name__}: {value}") from value
