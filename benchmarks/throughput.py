"""Storage overhead per trial and multi-worker throughput (BENCHMARKS.md, "Workers and storage").

    python benchmarks/throughput.py overhead [--trials 200]
        Seconds per trial of ``study.optimize`` with an objective that does nothing (12
        parameters, RandomSampler) for each storage option: in-memory, Optuna's stock SQLite,
        SQLite WAL + synchronous=NORMAL (the ciq-optuna default, with and without heartbeats),
        WAL + synchronous=OFF, a JournalStorage file, and PostgreSQL (a local server, fsync on).

    python benchmarks/throughput.py workers [--workers 1 2 4 8] [--objective 0.2]
        Trials per second of W worker processes (``ciq_optuna.workers.run_worker``, one thread
        each, GeneticSampler, every evaluation isolated in its own process and sleeping 0.2 s)
        on SQLite and PostgreSQL. Throughput is counted from the first trial's start to the last
        trial's end (worker start-up excluded); the framework overhead per trial is
        ``W * span / trials - objective``.

The PostgreSQL server is started from the Debian binaries by tests/conftest.py's PostgresServer.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import optuna

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from ciq_optuna.isolation import run_isolated  # noqa: E402
from ciq_optuna.study.storage import resolve_storage  # noqa: E402
from ciq_optuna.workers import add_worker_arguments, register_objective_factory, run_worker_command  # noqa: E402

KIND = "bench-sleep"


def _suggest(trial: optuna.trial.Trial) -> dict:
    params = {f"i{k}": trial.suggest_int(f"i{k}", 0, 63) for k in range(6)}
    params.update(
        {f"c{k}": trial.suggest_categorical(f"c{k}", ["a", "b", "c", "(not passed)"]) for k in range(6)}
    )
    return params


def _sleep_eval(seconds: float, params: dict) -> float:
    time.sleep(seconds)
    return float(sum(v for v in params.values() if isinstance(v, int)))


def _factory(study: optuna.Study):
    seconds = float(study.user_attrs["objective"]["seconds"])

    def objective(trial: optuna.trial.Trial) -> float:
        return run_isolated(_sleep_eval, seconds, _suggest(trial), timeout=60)

    return objective


def _sampler(study: optuna.Study) -> optuna.samplers.BaseSampler:
    from ciq_optuna.samplers import GeneticSampler

    return GeneticSampler(pool_size=8)


register_objective_factory(KIND, _factory, sampler=_sampler)


def _noop(trial: optuna.trial.Trial) -> float:
    return float(len(_suggest(trial)))


def _time_per_trial(storage, n_trials: int) -> float:
    study = optuna.create_study(storage=storage, sampler=optuna.samplers.RandomSampler(seed=0))
    study.optimize(_noop, n_trials=5)  # warm up (tables, caches)
    start = time.perf_counter()
    study.optimize(_noop, n_trials=n_trials)
    assert all(t.state == optuna.trial.TrialState.COMPLETE for t in study.get_trials(deepcopy=False))
    return (time.perf_counter() - start) / n_trials


def overhead(args: argparse.Namespace) -> None:
    from conftest import PostgresServer

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    work = Path(tempfile.mkdtemp(prefix="ciq-bench-", dir=args.dir))
    counter = iter(range(100000))

    def sqlite(mode: str, hb: int | None):
        return lambda: resolve_storage(
            f"sqlite:///{work / f'{mode}-{next(counter)}.db'}",
            default_path=work / "x.db",
            sqlite_mode=mode,
            heartbeat_interval=hb,
        )

    server = PostgresServer().start()
    options = {
        "in-memory (no storage)": lambda: optuna.storages.InMemoryStorage(),
        "SQLite, Optuna default (rollback journal, synchronous=FULL)": sqlite("optuna-default", None),
        "SQLite, WAL + synchronous=NORMAL (ciq-optuna default)": sqlite("tuned", None),
        "SQLite, WAL + synchronous=NORMAL + heartbeat (as workers run)": sqlite("tuned", 10),
        "SQLite, WAL + synchronous=OFF": sqlite("wal-off", None),
        "JournalStorage file (not an RDB)": lambda: optuna.storages.JournalStorage(
            optuna.storages.journal.JournalFileBackend(str(work / f"j-{next(counter)}.log"))
        ),
        "PostgreSQL 15, local, fsync on": lambda: resolve_storage(
            server.url(), default_path=work / "x.db", heartbeat_interval=None
        ),
        "PostgreSQL 15, local, fsync on + heartbeat": lambda: resolve_storage(
            server.url(), default_path=work / "x.db"
        ),
    }
    times: dict[str, list[float]] = {name: [] for name in options}
    try:
        # Round robin, so that a change in machine load hits every option alike.
        for _ in range(args.repeat):
            for name, make in options.items():
                times[name].append(_time_per_trial(make(), args.trials))
                print(f"{name:65s} {times[name][-1] * 1000:7.2f} ms/trial", flush=True)
    finally:
        server.stop()
    base = statistics.median(times["in-memory (no storage)"])
    print("\n| storage | ms per trial, median (min-max) | overhead vs in-memory, ms |\n|---|---:|---:|")
    for name, values in times.items():
        med = statistics.median(values)
        print(
            f"| {name} | {med * 1000:.1f} ({min(values) * 1000:.1f}-{max(values) * 1000:.1f}) | "
            f"{(med - base) * 1000:.1f} |"
        )


def _run_workers(url: str, workers: int, budget: int, seconds: float, work: Path) -> dict:
    storage = resolve_storage(url, default_path=work / "x.db", heartbeat_interval=None)
    name = f"bench-{workers}-{time.time_ns()}"
    study = optuna.create_study(storage=storage, study_name=name)
    study.set_user_attr("budget", budget)
    study.set_user_attr("objective", {"kind": KIND, "seconds": seconds})
    env = dict(os.environ, CIQ_OPTUNA_STORAGE=url)
    argv = [sys.executable, __file__, "worker", "--study", name]
    procs = [
        subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        for _ in range(workers)
    ]
    errors = [p.communicate()[1] for p in procs]
    if any(p.returncode for p in procs):
        raise SystemExit("a worker failed:\n" + "\n".join(errors))
    trials = [t for t in study.get_trials(deepcopy=False) if t.state == optuna.trial.TrialState.COMPLETE]
    span = (max(t.datetime_complete for t in trials) - min(t.datetime_start for t in trials)).total_seconds()
    return {
        "workers": workers,
        "trials": len(trials),
        "span_s": span,
        "trials_per_s": len(trials) / span,
        "overhead_ms": (workers * span / len(trials) - seconds) * 1000,
    }


def workers(args: argparse.Namespace) -> None:
    from conftest import PostgresServer

    work = Path(tempfile.mkdtemp(prefix="ciq-bench-", dir=args.dir))
    results = []
    server = PostgresServer().start()
    try:
        for backend in ("sqlite", "postgresql"):
            for w in args.workers:
                url = (
                    f"sqlite:///{work / f'w{w}.db'}"
                    if backend == "sqlite"
                    else server.create_database(f"w{w}")
                )
                budget = max(args.trials_per_worker * w, 24)
                row = {"storage": backend, **_run_workers(url, w, budget, args.objective, work)}
                results.append(row)
                print(json.dumps(row), flush=True)
    finally:
        server.stop()
    ideal = "ideal 1/objective per worker"
    print(
        f"\n| storage | workers | trials | trials/s ({ideal}) | overhead per trial (ms) |\n|---|---:|---:|---:|---:|"
    )
    for r in results:
        print(
            f"| {r['storage']} | {r['workers']} | {r['trials']} | {r['trials_per_s']:.2f} "
            f"({r['workers'] / args.objective:.0f}) | {r['overhead_ms']:.0f} |"
        )


def profile(args: argparse.Namespace) -> None:
    """cProfile of one worker in this process: where the framework time of a trial goes."""
    import cProfile
    import pstats

    from ciq_optuna.workers import run_worker

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    work = Path(tempfile.mkdtemp(prefix="ciq-bench-", dir=args.dir))
    url = f"sqlite:///{work / 'profile.db'}"
    study = optuna.create_study(storage=resolve_storage(url, default_path=work / "x.db"), study_name="p")
    study.set_user_attr("budget", args.trials)
    study.set_user_attr("objective", {"kind": KIND, "seconds": args.objective})
    profiler = cProfile.Profile()
    start = time.perf_counter()
    profiler.runcall(run_worker, url, "p", default_path=work / "x.db")
    total = time.perf_counter() - start
    print(f"{args.trials} trials in {total:.2f} s: {total / args.trials * 1000:.0f} ms per trial")
    stats = pstats.Stats(profiler)
    wanted = {
        f"run_isolated (process start, {args.objective}s objective, result)": "run_isolated",
        "Optuna parameter commits (_set_trial_param)": "_set_trial_param",
        "Study.ask (new trial, sampler before_trial)": "ask",
        "reading trials back (_read_trials_from_remote_storage)": "_read_trials_from_remote_storage",
        "tell (_tell_with_warning)": "_tell_with_warning",
    }
    for label, func in wanted.items():
        cum = sum(v[3] for k, v in stats.stats.items() if k[2] == func)
        print(f"  {label:60s} {cum / args.trials * 1000:7.1f} ms per trial")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("overhead")
    p.add_argument("--trials", type=int, default=200)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--dir", default=None)
    p = sub.add_parser("workers")
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4, 8])
    p.add_argument("--objective", type=float, default=0.2, help="seconds per evaluation")
    p.add_argument("--trials-per-worker", type=int, default=12)
    p.add_argument("--dir", default=None)
    p = sub.add_parser("profile")
    p.add_argument("--trials", type=int, default=30)
    p.add_argument("--objective", type=float, default=0.2)
    p.add_argument("--dir", default=None)
    p = sub.add_parser("worker", help="(internal) one worker process")
    add_worker_arguments(p)
    args = parser.parse_args()
    if args.command == "overhead":
        overhead(args)
    elif args.command == "workers":
        workers(args)
    elif args.command == "profile":
        profile(args)
    else:
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        return run_worker_command(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
