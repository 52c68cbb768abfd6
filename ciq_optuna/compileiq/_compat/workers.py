"""Workers that evaluate a batch of candidates: in the calling process, in a pool of processes,
in one fresh process per candidate, or as asyncio tasks.

Unlike CompileIQ, a candidate whose objective raises, returns a wrong type or arity, hangs past
``task_timeout`` or kills its process fails on its own (score ``"*"``, a RuntimeWarning and the
reason in ``Score.error``); the search goes on.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import multiprocessing
import multiprocessing.connection
import os
import sys
import threading
import time
import traceback
import warnings
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ciq_optuna.compileiq._compat.scores import (
    BASELINE_CONFIG,
    Score,
    invalidate_score,
    normalize_scores,
    validate_scores,
)

__all__ = [
    "AsyncWorker",
    "IsoMultiProcessWorker",
    "ManualWorker",
    "MultiProcessWorker",
    "Worker",
]

# The outcome of one call: ("ok", value) | ("error", message) | ("timeout", seconds) | ("died", exit code)
Outcome = tuple[str, Any]


class Worker(ABC):
    """Base of CompileIQ's workers. ``run`` returns one Score per candidate, plus the baseline.

    A custom worker subclasses this, implements :meth:`run`, and (when ``normalize``) measures
    its own baseline with :data:`BASELINE_CONFIG`, as in CompileIQ.
    """

    def __init__(
        self,
        cache_folder: Path | None = None,
        normalize: bool = False,
        tracker: Any = None,
        respects_num_workers: bool = True,
        supports_timeout: bool = True,
    ) -> None:
        self.cache_folder = cache_folder
        self.normalize = normalize
        self.tracker = tracker
        self.respects_num_workers = respects_num_workers
        self.supports_timeout = supports_timeout
        self.baseline_score: Any = None

    @classmethod
    def create(cls, cache_folder: Path | None, normalize: bool, tracker: Any = None) -> Worker:
        """Build the worker for one Search (CompileIQ's factory)."""
        return cls(cache_folder=cache_folder, normalize=normalize, tracker=tracker)

    @abstractmethod
    def run(
        self,
        *,
        function: Callable[[Any], Any],
        params_pool: Sequence[Any],
        params_ids: Sequence[int | str],
        num_function_returns: int = 1,
        **kwargs: Any,
    ) -> list[Score]:
        """Evaluate ``params_pool``; one Score per id (plus a baseline Score when measured)."""

    normalize_scores = staticmethod(normalize_scores)
    invalidate_score = staticmethod(invalidate_score)


class _EvaluatingWorker(Worker):
    """Shared logic of the built-in workers: baseline, validation, normalisation."""

    def run(
        self,
        *,
        function: Callable[[Any], Any],
        params_pool: Sequence[Any],
        params_ids: Sequence[int | str],
        num_function_returns: int = 1,
        num_workers: int | None = None,
        task_timeout: float | None = None,
        **kwargs: Any,
    ) -> list[Score]:
        n = num_function_returns
        workers = max(1, num_workers or 1)
        if len(params_ids) < len(params_pool):
            raise ValueError(
                f"params_ids has {len(params_ids)} ids for {len(params_pool)} candidates: one id per candidate"
            )
        params_ids = list(params_ids)[: len(params_pool)]  # as CompileIQ: ids past the pool are unused
        scores: list[Score] = []
        if self.normalize and self.baseline_score is None:
            (outcome,) = self._evaluate(function, [BASELINE_CONFIG], workers, task_timeout)
            base = _to_score(outcome, BASELINE_CONFIG, "baseline", n)
            if base.failed:
                raise RuntimeError(
                    f"Baseline measurement for normalization failed: {base.error or base.score}"
                )
            self.baseline_score = base.score
            base.norm_score = 1.0 if n == 1 else tuple([1.0] * n)
            base.is_baseline = True
            scores.append(base)
        outcomes = self._evaluate(function, list(params_pool), workers, task_timeout)
        for pid, params, outcome in zip(params_ids, params_pool, outcomes, strict=True):
            score = _to_score(outcome, params, pid, n)
            if self.normalize:
                norm = normalize_scores(score.score, self.baseline_score)
                score.norm_score = tuple(norm) if isinstance(norm, list) else norm
            if score.error:
                warnings.warn(f"candidate {pid} failed: {score.error}", RuntimeWarning, stacklevel=2)
            scores.append(score)
        return scores

    @abstractmethod
    def _evaluate(
        self, function: Callable[[Any], Any], params: list[Any], workers: int, timeout: float | None
    ) -> list[tuple[Outcome, int]]:
        """Call ``function`` on each params; (outcome, pid) per params, in input order."""


def _to_score(result: tuple[Outcome, int], params: Any, pid: int | str, n: int) -> Score:
    """A Score from one call's outcome; anything but a valid return value fails the candidate."""
    (kind, value), proc = result
    meta = json.dumps({"pid": proc})
    error = None
    if kind == "ok":
        try:
            return Score(
                score=validate_scores(value, n), params=params, param_id=pid, num_objectives=n, metadata=meta
            )
        except ValueError as exc:
            error = str(exc)
    elif kind == "timeout":
        error = f"timed out after {value} s"
    elif kind == "died":
        error = f"the objective's process died with exit code {value}"
    else:
        error = str(value)
    return Score(
        score=invalidate_score(n), params=params, param_id=pid, num_objectives=n, metadata=meta, error=error
    )


def _describe(exc: BaseException) -> str:
    """One line: the exception and where the objective raised it."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" ({Path(frames[-1].filename).name}:{frames[-1].lineno})" if frames else ""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}{where}"


def _call(function: Callable[[Any], Any], params: Any) -> Outcome:
    try:
        return ("ok", function(params))
    except Exception as exc:
        return ("error", _describe(exc))


class MultiProcessWorker(_EvaluatingWorker):
    """CompileIQ's default (native) worker.

    ``num_workers=1``: the objective runs in the calling process; a ``task_timeout`` then
    abandons the call (it keeps running in its thread, as in CompileIQ). ``num_workers>1``: a
    pool of that many processes, started per batch; a task that times out has its process
    killed and replaced.
    """

    def _evaluate(
        self, function: Callable[[Any], Any], params: list[Any], workers: int, timeout: float | None
    ) -> list[tuple[Outcome, int]]:
        if workers == 1:
            return [(_call_in_thread(function, p, timeout), os.getpid()) for p in params]
        return _run_in_processes(function, params, workers, timeout, one_per_process=False)


class IsoMultiProcessWorker(_EvaluatingWorker):
    """One fresh process per candidate (at most ``num_workers`` at a time), killed on timeout."""

    def _evaluate(
        self, function: Callable[[Any], Any], params: list[Any], workers: int, timeout: float | None
    ) -> list[tuple[Outcome, int]]:
        return _run_in_processes(function, params, workers, timeout, one_per_process=True)


class AsyncWorker(_EvaluatingWorker):
    """Runs an ``async def`` objective: the whole batch concurrently in one event loop."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("respects_num_workers", False)
        super().__init__(*args, **kwargs)

    def _evaluate(
        self, function: Callable[[Any], Any], params: list[Any], workers: int, timeout: float | None
    ) -> list[tuple[Outcome, int]]:
        if not inspect.iscoroutinefunction(function):
            raise TypeError("the async worker needs an `async def` objective function")

        async def one(p: Any) -> Outcome:
            try:
                return ("ok", await asyncio.wait_for(function(p), timeout))
            except asyncio.TimeoutError:
                return ("timeout", timeout)
            except Exception as exc:
                return ("error", _describe(exc))

        async def everything() -> list[Outcome]:
            return list(await asyncio.gather(*(one(p) for p in params)))

        return [(o, os.getpid()) for o in asyncio.run(everything())]


class ManualWorker(Worker):
    """For external ask/evaluate/tell loops only: ``start()`` and ``evaluate()`` refuse to run."""

    def run(self, **kwargs: Any) -> list[Score]:
        raise RuntimeError("ManualWorker evaluates nothing: use Search.ask() and Search.tell() yourself")


def _call_in_thread(function: Callable[[Any], Any], params: Any, timeout: float | None) -> Outcome:
    """Call in this process; with a timeout, in a daemon thread that is abandoned when late."""
    if timeout is None:
        return _call(function, params)
    box: list[Outcome] = []
    thread = threading.Thread(target=lambda: box.append(_call(function, params)), daemon=True)
    thread.start()
    thread.join(timeout)
    return box[0] if box else ("timeout", timeout)


def _start_method() -> str:
    """``CIQ_PROCESS_MODE``, else ``fork`` where it exists (lambdas and closures work), else spawn."""
    mode = os.environ.get("CIQ_PROCESS_MODE", "").strip()
    if mode:
        if mode not in multiprocessing.get_all_start_methods():
            raise ValueError(
                f"CIQ_PROCESS_MODE={mode!r} is not available here: use one of "
                f"{multiprocessing.get_all_start_methods()}"
            )
        return mode
    return (
        "fork" if "fork" in multiprocessing.get_all_start_methods() and sys.platform != "darwin" else "spawn"
    )


def _child(conn: multiprocessing.connection.Connection, function: Callable[[Any], Any]) -> None:
    """Child loop: receive (index, params), send (index, pid, outcome); None ends it."""
    while True:
        try:
            task = conn.recv()
        except (EOFError, KeyboardInterrupt):
            return
        if task is None:
            return
        index, params = task
        outcome = _call(function, params)
        try:
            conn.send((index, os.getpid(), outcome))
        except Exception as exc:
            conn.send(
                (index, os.getpid(), ("error", f"the return value cannot be sent back: {_describe(exc)}"))
            )


class _Slot:
    """One child process and the task it is running."""

    def __init__(self, ctx: Any, function: Callable[[Any], Any]) -> None:
        self.conn, child_conn = ctx.Pipe()
        self.proc = ctx.Process(target=_child, args=(child_conn, function), daemon=True)
        self.proc.start()
        child_conn.close()
        self.task: int | None = None
        self.deadline = float("inf")

    def stop(self, kill: bool = False) -> None:
        if kill:
            self.proc.kill()
        else:
            try:
                self.conn.send(None)
            except OSError:
                pass
        self.proc.join(5)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()
        self.conn.close()


def _run_in_processes(
    function: Callable[[Any], Any],
    params: list[Any],
    workers: int,
    timeout: float | None,
    one_per_process: bool,
) -> list[tuple[Outcome, int]]:
    """Evaluate in child processes, at most ``workers`` at once; kill the ones that run late."""
    ctx = multiprocessing.get_context(_start_method())
    todo = deque(range(len(params)))
    results: dict[int, tuple[Outcome, int]] = {}
    slots: list[_Slot] = []
    try:
        while todo or any(s.task is not None for s in slots):
            while todo and (len(slots) < workers or any(s.task is None for s in slots)):
                slot = next((s for s in slots if s.task is None), None)
                if slot is None:
                    slot = _Slot(ctx, function)
                    slots.append(slot)
                slot.task = todo.popleft()
                slot.deadline = time.monotonic() + timeout if timeout is not None else float("inf")
                slot.conn.send((slot.task, params[slot.task]))
            busy = [s for s in slots if s.task is not None]
            wait_for = min(s.deadline for s in busy) - time.monotonic()
            ready = multiprocessing.connection.wait(
                [s.conn for s in busy] + [s.proc.sentinel for s in busy],
                timeout=None if wait_for == float("inf") else max(0.0, wait_for),
            )
            for slot in busy:
                done = False
                if slot.conn in ready or slot.proc.sentinel in ready:
                    try:
                        if slot.conn.poll():
                            index, pid, outcome = slot.conn.recv()
                            results[index] = (outcome, pid)
                            done = True
                    except (EOFError, OSError):
                        pass
                    if not done and not slot.proc.is_alive():
                        slot.proc.join()
                        results[slot.task] = (("died", slot.proc.exitcode), slot.proc.pid)
                        slot.stop(kill=True)
                        slots.remove(slot)
                        continue
                if not done and time.monotonic() >= slot.deadline:
                    results[slot.task] = (("timeout", timeout), slot.proc.pid)
                    slot.stop(kill=True)
                    slots.remove(slot)
                    continue
                if done:
                    slot.task = None
                    if one_per_process:
                        slot.stop()
                        slots.remove(slot)
    finally:
        for slot in slots:
            slot.stop(kill=slot.task is not None)
    return [results[i] for i in range(len(params))]
