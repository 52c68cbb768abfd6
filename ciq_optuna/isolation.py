"""Run one evaluation in a fresh process, so that a crash or a hang fails one trial only.

:func:`run_isolated` calls ``func(*args, **kwargs)`` in a child process that leads its own
process group (a new session). On timeout the whole group is killed with SIGKILL, so helpers
the evaluation started (a compiler, ptxas under nvcc, a benchmark binary) die with it. A
segfault, ``os._exit``, an exception or a timeout all come back as :class:`IsolatedFailure`
with a one-line reason.

Start method: **forkserver**. The worker that calls us is multi-threaded (Optuna ``n_jobs``
threads, heartbeat threads, SQLAlchemy pools); ``fork`` from such a process copies locks held
by other threads and can deadlock the child. ``spawn`` is safe but starts a new interpreter and
re-imports everything for every trial. The fork server is a single-threaded process started
once (on first use) that forks each child from a clean state: safe like ``spawn``, and each
child only pays for a fork. The server preloads the main script and the module of the first
function run, so children do not re-import them (see :func:`_preload_main_in_forkserver`). The consequence: ``func``, its arguments and its result must be
picklable, and ``func`` must be importable by name (a module-level function, not a lambda).

If the worker itself is SIGKILLed, no evaluation outlives it: each child watches a pipe whose
write end only the worker holds, and kills its own process group when that pipe closes.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.forkserver
import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable
from typing import Any, TypeVar

from ciq_optuna.errors import CiqError

T = TypeVar("T")

#: The multiprocessing start method used for evaluations (see the module docstring).
START_METHOD = "forkserver"

_MAIN_ENV = "CIQ_OPTUNA_FORKSERVER_MAIN"
_SERVER_ENV = "CIQ_OPTUNA_FORKSERVER"
_context_lock = threading.Lock()
_context: multiprocessing.context.BaseContext | None = None
_extra_preload: list[str] = []


class IsolatedFailure(CiqError):
    """An isolated evaluation did not return a result; ``str()`` is a one-line reason.

    ``kind`` is ``"timeout"``, ``"signal"``, ``"exit"`` or ``"exception"``.
    """

    def __init__(self, reason: str, kind: str) -> None:
        super().__init__(reason)
        self.kind = kind


def _get_context(func: Callable[..., Any]) -> multiprocessing.context.BaseContext:
    """The fork-server context; the first call starts the server with our modules preloaded."""
    global _context
    with _context_lock:
        if _context is None:
            ctx = multiprocessing.get_context(START_METHOD)
            preload = [__name__, *_extra_preload]
            module = getattr(func, "__module__", None)
            if module and module not in ("__main__", "__mp_main__", *preload):
                preload.append(module)
            ctx.set_forkserver_preload(preload)
            main_path = getattr(sys.modules.get("__main__"), "__file__", None)
            if main_path:
                os.environ[_MAIN_ENV] = os.path.normpath(main_path)
            os.environ[_SERVER_ENV] = "1"
            try:
                multiprocessing.forkserver.ensure_running()
            finally:
                os.environ.pop(_MAIN_ENV, None)
                os.environ.pop(_SERVER_ENV, None)
            _context = ctx
        return _context


def preload(module: str) -> None:
    """Have the fork server import ``module`` when it starts, so that children do not.

    Only effective before the first :func:`run_isolated` call of this process (the server is
    started once); later calls are ignored and each child imports what it needs itself.
    """
    with _context_lock:
        if _context is None and module not in _extra_preload:
            _extra_preload.append(module)


def _preload_main_in_forkserver() -> None:
    """In the fork server only: import the parent's main script once, as children expect.

    CPython 3.11's fork server is meant to do this (``set_forkserver_preload(["__main__"])``)
    but never receives the script's path, so every child re-ran the main script and all its
    imports (optuna, pandas: ~0.8 s per evaluation here). The path comes through
    ``$CIQ_OPTUNA_FORKSERVER_MAIN``, set only while the server starts.
    """
    path = os.environ.pop(_MAIN_ENV, None)
    if not path or getattr(sys.modules.get("__main__"), "__file__", None) == path:
        return
    from multiprocessing import process, spawn

    process.current_process()._inheriting = True
    try:
        spawn.import_main_path(path)
    except Exception:  # the children will report the same error in their own trial
        pass
    finally:
        del process.current_process()._inheriting


def _orphan_excepthook(kind: type[BaseException], value: BaseException, tb: Any) -> None:
    """The fork server's exception hook: one line, not a traceback, for a child orphaned at birth.

    When a worker is SIGKILLed while the fork server forks a child for it, the child finds the
    pipe of its work empty (``EOFError`` in multiprocessing's ``spawn._main``) and the fork
    server reports that through ``sys.excepthook`` into the dead worker's log. Nothing is lost:
    the trial never started and the study's stale-trial handling retries it.
    """
    if issubclass(kind, EOFError):
        sys.stderr.write("ciq-optuna: an evaluation did not start: the worker process that asked for it is gone\n")
        return
    sys.__excepthook__(kind, value, tb)


def _watch_lifeline(lifeline: Any) -> None:
    """Kill this process group as soon as the worker that started it is gone.

    ``lifeline`` is the read end of a pipe whose only write end the worker holds: it reaches
    end-of-file when the worker exits or is killed (even before it is reaped), or closes it.
    """

    def watch() -> None:
        try:
            lifeline.poll(None)
        except OSError:
            pass
        os.killpg(os.getpgrp(), signal.SIGKILL)

    threading.Thread(target=watch, name="ciq-lifeline", daemon=True).start()


def _child(conn: Any, lifeline: Any, func: Callable[..., Any], args: tuple, kwargs: dict) -> None:
    """Entry point of the child: new session, run, send ("ok", result) or ("error", ...)."""
    os.setsid()
    _watch_lifeline(lifeline)
    try:
        result = func(*args, **kwargs)
    except BaseException as exc:  # noqa: BLE001 - everything must reach the parent as one line
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        reply: tuple = ("error", type(exc).__name__, message, traceback.format_exc())
    else:
        reply = ("ok", result)
    try:
        _reply(conn, reply)
    except Exception as exc:  # an unpicklable result
        _reply(conn, ("error", type(exc).__name__, f"result cannot be sent back: {exc}", ""))
    conn.close()


def _reply(conn: Any, message: tuple) -> None:
    """Send ``message`` to the worker. When the worker is gone (killed while this ran: its end of
    the pipe is closed) nobody is left to tell, and the lifeline ends this group: not an error of
    this process to report."""
    try:
        conn.send(message)
    except OSError:
        pass


def _kill_group(pid: int) -> None:
    """SIGKILL the process group led by ``pid`` (or the process alone if it has no group yet)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def run_isolated(func: Callable[..., T], *args: Any, timeout: float | None, **kwargs: Any) -> T:
    """Return ``func(*args, **kwargs)`` computed in a fresh process group.

    ``timeout`` is in seconds (None: wait forever). Raises :class:`IsolatedFailure` whose
    message is one line, e.g. ``timed out after 5.0 s``, ``crashed with signal 11 (SIGSEGV)``,
    ``raised ValueError: bad tile``. Safe to call from several threads at once.
    """
    ctx = _get_context(func)
    receiver, sender = ctx.Pipe(duplex=False)
    life_r, life_w = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(sender, life_r, func, args, kwargs), daemon=False)
    try:
        proc.start()
    except BaseException:
        life_w.close()
        raise
    finally:
        sender.close()
        life_r.close()
    try:
        return _wait_for_child(proc, receiver, timeout)
    finally:
        life_w.close()


def _wait_for_child(proc: Any, receiver: Any, timeout: float | None) -> Any:
    """The result sent by the child, or :class:`IsolatedFailure`."""
    message: Any = None
    try:
        if receiver.poll(timeout):
            try:
                message = receiver.recv()
            except (EOFError, OSError):
                message = None
        else:
            _kill_group(proc.pid)
            proc.join()
            raise IsolatedFailure(f"timed out after {float(timeout):.1f} s", "timeout")
    except BaseException:
        if proc.is_alive():
            _kill_group(proc.pid)
        proc.join()
        raise
    finally:
        receiver.close()
    # Helpers the evaluation left running in its group must not outlive it.
    _kill_group_quietly(proc.pid)
    proc.join()
    if message is not None:
        if message[0] == "ok":
            return message[1]
        _, name, text, _tb = message
        raise IsolatedFailure(f"raised {name}: {text}" if text else f"raised {name}", "exception")
    code = proc.exitcode
    if code is not None and code < 0:
        raise IsolatedFailure(f"crashed with signal {-code} ({_signal_name(-code)})", "signal")
    raise IsolatedFailure(f"exited with status {code} without a result", "exit")


def _kill_group_quietly(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


if os.environ.pop(_SERVER_ENV, None):  # in the fork server only (set while it starts)
    sys.excepthook = _orphan_excepthook
_preload_main_in_forkserver()
