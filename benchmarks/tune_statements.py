"""Per ``ciq-optuna tune`` trial: CPU of the process and of its threads, SQL statements, pool checkouts.

    nice -n 10 python benchmarks/tune_statements.py sqlite|postgresql [--trials 30] [--statements]

The real ``tune`` (stencil example, sm_90a, as ``benchmarks/overhead.py`` runs it) in this
process on a fresh study (PostgreSQL 15 started by tests/conftest.py's PostgresServer, or a
SQLite file), first 10 trials, then a run of one trial and a run of 1 + ``--trials``; each figure is
the second run minus the first, per trial. CPU is split into the main thread and the threads
started during the runs (heartbeats, the flush timer, the planning lock's lease), each measured
with ``time.thread_time``. ``--statements`` also counts the SQL statements of the study's engine
and its pool checkouts by caller (the stack walk it needs inflates the CPU figures: read them
from a run without it).
"""

from __future__ import annotations

import argparse
import collections
import logging
import os
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

import optuna

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(1, str(REPO / "tests"))

from ciq_optuna.study.storage import resolve_storage  # noqa: E402
from ciq_optuna.tune import TuneConfig, tune  # noqa: E402

thread_cpu: collections.Counter[str] = collections.Counter()
_run = threading.Thread.run


def _timed_run(self: threading.Thread) -> None:
    start = time.thread_time()
    try:
        _run(self)
    finally:
        target = getattr(self, "_target", None)
        thread_cpu[getattr(target, "__qualname__", None) or type(self).__name__] += time.thread_time() - start


threading.Thread.run = _timed_run  # type: ignore[method-assign]


def _caller() -> str:
    for frame in reversed(traceback.extract_stack()[:-2]):
        name = frame.filename
        if not any(skip in name for skip in ("sqlalchemy", "tune_statements", "contextlib", "threading")):
            return f"{os.path.basename(name)}:{frame.name}"
    return "?"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("storage", choices=["sqlite", "postgresql"])
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--statements", action="store_true")
    args = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    logging.getLogger("ciq_optuna").setLevel(logging.ERROR)
    work = Path(tempfile.mkdtemp(prefix="ciq-tune-statements-"))
    server = None
    if args.storage == "postgresql":
        from conftest import PostgresServer

        server = PostgresServer().start()
        url = server.url()
    else:
        url = str(work / "s.db")
    try:
        storage = resolve_storage(url, default_path=work / "x.db")

        def config(trials: int) -> TuneConfig:
            return TuneConfig(
                kernel=REPO / "examples" / "stencil" / "stencil.sm_90a.ptx", arch="sm_90a",
                minimize=["spill-bytes"], trials=trials, progress=False, simplify=False, screen=False,
                workdir=work, acf=work / "t.acf", study_name="t", seed=1,
            )

        tune(config(10), storage=storage)
        counts: collections.Counter[tuple[str, str, str, str]] = collections.Counter()
        if args.statements:
            from sqlalchemy import event

            engine = storage.backend.engine

            @event.listens_for(engine, "before_cursor_execute")
            def statement(conn, cursor, text, params, context, executemany):  # type: ignore[no-untyped-def]
                counts[("statement", threading.current_thread().name[:12], _caller(), " ".join(text.split())[:60])] += 1

            @event.listens_for(engine.pool, "checkout")
            def checkout(*_):  # type: ignore[no-untyped-def]
                counts[("checkout", threading.current_thread().name[:12], _caller(), "")] += 1

        def run(trials: int) -> tuple[float, collections.Counter, collections.Counter]:
            thread_cpu.clear()
            counts.clear()
            start = time.process_time()
            tune(config(trials), storage=storage)
            return time.process_time() - start, collections.Counter(thread_cpu), collections.Counter(counts)

        c1, t1, s1 = run(11)
        ck, tk, sk = run(12 + args.trials)
        k = args.trials
        print(f"{args.storage}: process CPU {(ck - c1) / k * 1000:.2f} ms per trial")
        for name in sorted(set(t1) | set(tk)):
            print(f"  threads {name}: {(tk[name] - t1[name]) / k * 1000:.2f} ms")
        others = sum(tk.values()) - sum(t1.values())
        print(f"  main thread: {((ck - c1) - others) / k * 1000:.2f} ms")
        for key in sorted(set(s1) | set(sk), key=lambda key: s1[key] - sk[key]):
            per = (sk[key] - s1[key]) / k
            if abs(per) > 0.05:
                print(f"  {per:6.2f} {key[0]:9s} {key[1]:12s} {key[2]:40s} {key[3]}")
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
