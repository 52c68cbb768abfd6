"""Framework overhead per trial of ``ciq-optuna tune``: ptxas alone vs tune, interleaved, per storage.

    nice -n 10 python benchmarks/overhead.py [--sizes 100 1000 5000] [--chunks 3] [--chunk 10]

For each storage (SQLite as ``resolve_storage`` opens it, i.e. the default of ``ciq-optuna tune``;
the same file with Optuna's plain ``RDBStorage`` = before the batched storage; a JournalStorage
file; in-memory; PostgreSQL 15 started by tests/conftest.py's PostgresServer, fsync on) and for
each study size, the real ``ciq_optuna.tune.tune`` runs the stencil example (sm_90a,
``--minimize spill-bytes``, no screening, no simplification) for ``--chunk`` more trials, then
ptxas alone compiles those trials' own flag sets (the same argv, ``-v`` included, in a
subprocess); this alternates ``--chunks`` times so that both see the same machine load.

Per-trial time of tune = the time between the starts of consecutive trials (everything: ask,
sampler, compile, parse, record, budget gate). Overhead = median(tune) - median(ptxas alone).
Study sizes: after ``--chunk`` real seed trials, the study is pre-filled up to the size with
copies of those finished trials (``study.add_trials``, the same parameters and attributes) to
keep the run short, then measured with real trials as above.

The machine may be shared: wall-clock medians move with its load, so the table also gives CPU
time, which moves less: the tune process's own CPU per trial (a run of ``--chunk`` trials minus a
run of one, over ``--chunk`` - 1: start-up, the sampler's first read of the study and ACF writing
cancel out; ptxas runs in a child and is not in it) and
ptxas's CPU per compile (``RUSAGE_CHILDREN``). Framework waits (fsync, database round trips to
a server process) show only in the wall-clock columns.
"""

from __future__ import annotations

import argparse
import logging
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import optuna

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from ciq_optuna.study.storage import resolve_storage  # noqa: E402
from ciq_optuna.tune import TuneConfig, prepare, tune  # noqa: E402

KERNEL = REPO / "examples" / "stencil" / "stencil.sm_90a.ptx"
ARCH = "sm_90a"


def _config(trials: int, workdir: Path) -> TuneConfig:
    return TuneConfig(
        kernel=KERNEL,
        arch=ARCH,
        minimize=["spill-bytes"],
        trials=trials,
        study_name="overhead",
        workdir=workdir,
        acf=workdir / "out.acf",
        progress=False,
        simplify=False,
        screen=False,
        seed=1,
    )


def _ptxas_alone(argvs: list[list[str]]) -> list[float]:
    out = []
    for argv in argvs:
        start = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True)
        out.append(time.perf_counter() - start)
    return out


def _prefill(study: optuna.Study, target: int) -> None:
    done = [t for t in study.get_trials(deepcopy=False) if t.state == optuna.trial.TrialState.COMPLETE]
    templates = [t for t in done if not t.user_attrs.get("baseline")]
    missing = target - len(study.get_trials(deepcopy=False))
    copies = [
        optuna.trial.create_trial(
            params=t.params,
            distributions=t.distributions,
            values=t.values,
            user_attrs=t.user_attrs,
            state=optuna.trial.TrialState.COMPLETE,
        )
        for t in (templates[i % len(templates)] for i in range(max(missing, 0)))
    ]
    study.add_trials(copies)


def _cpu_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(make: Callable[[], object], sizes: list[int], chunks: int, chunk: int, work: Path) -> Iterator:
    """(size, median tune s/trial, median ptxas s, tune CPU s/trial, ptxas CPU s, n) for one
    storage, one tuple per size as soon as it is measured."""
    storage = make()
    workdir = Path(tempfile.mkdtemp(prefix="wd-", dir=work))
    _, objective = prepare(_config(1, workdir))
    study = tune(_config(chunk, workdir), storage=storage).study  # seed trials for the pre-fill
    for size in sizes:
        _prefill(study, size - chunks * chunk)
        total = len(study.get_trials(deepcopy=False))
        tune_s: list[float] = []
        ptxas_s: list[float] = []
        tune_cpu: list[float] = []
        ptxas_cpu: list[float] = []
        for _ in range(chunks):
            before = total
            # CPU of this process per trial: a run of `chunk` trials minus a run of one trial, over
            # chunk - 1 (start-up, the sampler's first read of the study and the ACF cancel out)
            c0 = time.process_time()
            tune(_config(total + 1, workdir), storage=storage)
            c1 = time.process_time()
            study = tune(_config(total + 1 + chunk, workdir), storage=storage).study
            c2 = time.process_time()
            new = [t for t in study.get_trials(deepcopy=False) if t.number >= before + 1]
            total = len(study.get_trials(deepcopy=False))
            tune_cpu.append(((c2 - c1) - (c1 - c0)) / (chunk - 1))
            starts = [t.datetime_start for t in new if t.datetime_start is not None]
            tune_s += [(b - a).total_seconds() for a, b in zip(starts[1:-1], starts[2:])]
            argvs = [
                objective.compiler.build_command(
                    KERNEL, ARCH, t.user_attrs["flags"], output=workdir / "alone.cubin"
                )
                for t in new
                if "flags" in t.user_attrs
            ]
            k0 = _cpu_children()
            ptxas_s += _ptxas_alone(argvs)
            ptxas_cpu.append((_cpu_children() - k0) / max(len(argvs), 1))
        yield (
            total,
            statistics.median(tune_s),
            statistics.median(ptxas_s),
            statistics.median(tune_cpu),
            statistics.median(ptxas_cpu),
            len(tune_s),
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 5000])
    parser.add_argument("--chunks", type=int, default=3)
    parser.add_argument("--chunk", type=int, default=10)
    parser.add_argument(
        "--only", nargs="*", help="sqlite sqlite-plain journal memory postgresql (default: all)"
    )
    parser.add_argument("--dir", default=None, help="work directory (default: a temporary one)")
    args = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    logging.getLogger("ciq_optuna").setLevel(logging.ERROR)  # in-memory studies take no ACF artifact
    work = Path(tempfile.mkdtemp(prefix="ciq-overhead-", dir=args.dir))
    counter = iter(range(1000))
    server = None

    def sqlite(batched: bool) -> Callable[[], object]:
        return lambda: resolve_storage(
            str(work / f"s{next(counter)}.db"), default_path=work / "x.db", batched=batched
        )

    def postgres() -> object:
        nonlocal server
        from conftest import PostgresServer

        server = PostgresServer().start()
        return resolve_storage(server.url(), default_path=work / "x.db")

    storages = {
        "sqlite": ("SQLite, as `tune` opens it (BatchedStorage)", sqlite(True)),
        "sqlite-plain": ("SQLite, Optuna's plain RDBStorage (before)", sqlite(False)),
        "journal": (
            "JournalStorage file",
            lambda: optuna.storages.JournalStorage(
                optuna.storages.journal.JournalFileBackend(str(work / f"j{next(counter)}.log"))
            ),
        ),
        "memory": ("in-memory", optuna.storages.InMemoryStorage),
        "postgresql": ("PostgreSQL 15, local, fsync on (BatchedStorage)", postgres),
    }
    print(f"# {' '.join(sys.argv)}")
    print(
        "| storage | trials in study | tune s/trial | ptxas alone s | overhead ms/trial | tune / ptxas "
        "| tune CPU ms/trial (this process) | ptxas CPU ms | n |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    try:
        for key, (name, make) in storages.items():
            if args.only and key not in args.only:
                continue
            for size, t, p, tc, pc, n in measure(make, args.sizes, args.chunks, args.chunk, work):
                print(
                    f"| {name} | {size} | {t:.3f} | {p:.3f} | {1000 * (t - p):.0f} | {t / p:.2f} "
                    f"| {1000 * tc:.1f} | {1000 * pc:.1f} | {n} |",
                    flush=True,
                )
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
