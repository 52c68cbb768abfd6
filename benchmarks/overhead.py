"""Framework overhead per trial of ``ciq-optuna tune``: ptxas alone vs tune, interleaved, per storage.

    nice -n 10 python benchmarks/overhead.py [--sizes 100 1000 5000] [--chunks 2] [--chunk 8] \
        [--only sqlite journal memory postgresql] [--fill-cache FILE] [--profile]

For each storage (SQLite as ``resolve_storage`` opens it, i.e. the default of ``ciq-optuna tune``;
``sqlite-plain``: the same file with Optuna's plain ``RDBStorage``, the "before"; a JournalStorage
file; in-memory; PostgreSQL 15 started by tests/conftest.py's PostgresServer, fsync on) and for
each study size, the real ``ciq_optuna.tune.tune`` runs the stencil example (sm_90a,
``--minimize spill-bytes``, no screening, no simplification) for ``--chunk`` more trials, then
ptxas alone compiles those trials' own flag sets (the same argv, ``-v`` included, in a
subprocess); this alternates ``--chunks`` times so that both see the same machine load.

Per-trial time of tune = the time between the starts of consecutive trials (everything: ask,
sampler, compile, parse, record, budget gate). Overhead = median(tune) - median(ptxas alone).

Study sizes: after ``--chunk`` real seed trials, the study is pre-filled up to the size with real
finished trials of random configurations (RandomSampler, the real ptxas through the same compile
objective, FAIL trials included), made once in a SQLite study of their own (``--fill-cache``
keeps it between runs) and copied in with ``study.add_trials``; one real trial then reads them
(not measured: the first read of the added trials is a one-off), and the study is measured with
real trials as above.

The machine may be shared: wall-clock medians move with its load, so the table also gives CPU
time, which moves less: the tune process's own CPU per trial (a run of ``--chunk`` trials minus a
run of one, over ``--chunk`` - 1: start-up, the sampler's first read of the study and ACF writing
cancel out; ptxas runs in a child and is not in it) and ptxas's CPU per compile
(``RUSAGE_CHILDREN``). The column "between trial starts" measures the same without a subtraction:
the process's CPU from the creation of the run's second trial to that of its last, over the
trials in between (start-up, the sampler's first read of the study in the first trial and the
final summaries are outside it; a
subtraction of two runs that each read a 5,000-trial study once leaves that read's noise over
``--chunk`` - 1 in the first column). Framework waits (fsync, database round trips to a server process) show
only in the wall-clock columns.

``--profile`` also samples the tune process's CPU (``ITIMER_PROF``) during both runs and prints,
per study size, where the CPU per trial goes (the same subtraction), by part of the code: the
innermost frame that belongs to a part names it; the column "outside samplers/" sums the parts
other than ``ciq_optuna/samplers/`` (the search itself: GeneticSampler, binary model), i.e. the
framework around the search (storage, objective, leases, Optuna's ask and tell, the loop). With a
search of ~100 ms per trial it moves by a few ms between runs (one sample is ~4 ms of CPU).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import logging
import os
import resource
import signal
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

from ciq_optuna.objectives.compile import TrialFailed  # noqa: E402
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


def fill_pool(objective: object, count: int, path: Path) -> list[optuna.trial.FrozenTrial]:
    """``count`` real finished trials of random configurations (the study's own compile
    objective, the real ptxas), made once in the SQLite study ``path`` and reused after."""
    storage = resolve_storage(str(path), default_path=path)
    study = optuna.create_study(
        storage=storage, study_name="fill", sampler=optuna.samplers.RandomSampler(seed=0), load_if_exists=True
    )
    done = [t for t in study.get_trials(deepcopy=False) if t.state.is_finished()]
    if len(done) < count:
        print(f"# making {count - len(done)} fill trials with the real ptxas in {path}", file=sys.stderr, flush=True)
        study.optimize(objective, n_trials=count - len(done), catch=(TrialFailed,), gc_after_trial=False)
        done = [t for t in study.get_trials(deepcopy=False) if t.state.is_finished()]
    return done[:count]


def _prefill(study: optuna.Study, target: int, pool: list[optuna.trial.FrozenTrial], used: list[int]) -> None:
    """Add trials of ``pool`` (in order, from ``used[0]`` on) until the study holds ``target``."""
    missing = target - len(study.get_trials(deepcopy=False))
    if missing <= 0:
        return
    if used[0] + missing > len(pool):
        raise SystemExit(f"the fill pool has {len(pool)} trials; {used[0] + missing} needed")
    copies = [
        optuna.trial.create_trial(
            params=t.params,
            distributions=t.distributions,
            values=t.values,
            user_attrs=t.user_attrs,
            state=t.state,
        )
        for t in pool[used[0] : used[0] + missing]
    ]
    used[0] += missing
    study.add_trials(copies)


#: Parts of the profile that are the search itself (other parts: the framework around it).
SEARCH_PARTS = ("(samplers/_binaries.py)", "(samplers/_genetic.py)")


class Profile:
    """CPU samples of this process (``ITIMER_PROF``), counted by part of the code."""

    PARTS = (
        ("samplers/_binaries.py", "binary model (samplers/_binaries.py)"),
        ("samplers/_genetic.py", "GeneticSampler (samplers/_genetic.py)"),
        ("study/_optuna.py", "storage"),
        ("study/storage.py", "storage"),
        ("/sqlalchemy/", "storage"),
        ("/optuna/storages/", "storage"),
        ("sqlite3", "storage"),
        ("/psycopg", "storage"),
        ("study/budget.py", "budget gate"),
        ("study/leases.py", "leases, planning lock"),
        ("/compilers/", "compile objective (Python side: run, parse, hash)"),
        ("/objectives/", "compile objective (Python side: run, parse, hash)"),
        ("/space/", "search space (suggest)"),
        ("/subprocess.py", "compile objective (Python side: run, parse, hash)"),
        ("/optuna/", "Optuna (ask, tell, trial)"),
        ("ciq_optuna/tune.py", "tune loop"),
    )

    def __init__(self) -> None:
        self.counts: collections.Counter[str] = collections.Counter()
        self.samples = 0

    def _handler(self, signum: int, frame: object) -> None:
        self.samples += 1
        f = frame
        while f is not None:
            name = f.f_code.co_filename  # type: ignore[attr-defined]
            for pattern, part in self.PARTS:
                if pattern in name:
                    self.counts[part] += 1
                    return
            f = f.f_back  # type: ignore[attr-defined]
        self.counts["other"] += 1

    def __enter__(self) -> Profile:
        signal.signal(signal.SIGPROF, self._handler)
        signal.setitimer(signal.ITIMER_PROF, 0.001, 0.001)
        return self

    def __exit__(self, *exc: object) -> None:
        signal.setitimer(signal.ITIMER_PROF, 0, 0)


def _cpu_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(
    make: Callable[[], object],
    sizes: list[int],
    chunks: int,
    chunk: int,
    work: Path,
    fill: Path,
    profile: bool,
) -> Iterator:
    """(size, median tune s/trial, median ptxas s, tune CPU s/trial, the same between trial
    starts, of which outside samplers/ (None without ``profile``), ptxas CPU s, n, profile) for one
    storage, one tuple per size as soon as it is measured."""
    storage = make()
    workdir = Path(tempfile.mkdtemp(prefix="wd-", dir=work))
    _, objective = prepare(_config(1, workdir))
    pool = fill_pool(objective, max(sizes), fill)
    used = [0]
    study = tune(_config(chunk, workdir), storage=storage).study  # seed trials
    for size in sizes:
        _prefill(study, size - chunks * chunk - 1, pool, used)
        # one trial first, not measured: the storage and its caches read the added trials once
        study = tune(_config(len(study.get_trials(deepcopy=False)) + 1, workdir), storage=storage).study
        total = len(study.get_trials(deepcopy=False))
        tune_s: list[float] = []
        ptxas_s: list[float] = []
        tune_cpu: list[float] = []
        between: list[float] = []  # CPU from the run's second trial start to its last, per trial
        framework_cpu: list[float] = []
        ptxas_cpu: list[float] = []
        parts: collections.Counter[str] = collections.Counter()
        for _ in range(chunks):
            before = total
            # CPU of this process per trial: a run of `chunk` trials minus a run of one trial, over
            # chunk - 1 (start-up, the sampler's first read of the study and the ACF cancel out)
            one, many = Profile(), Profile()
            with one if profile else _nothing():
                c0 = time.process_time()
                tune(_config(total + 1, workdir), storage=storage)
                c1 = time.process_time()
            with many if profile else _nothing(), _trial_starts(storage) as starts_cpu:
                c1 = time.process_time()
                study = tune(_config(total + 1 + chunk, workdir), storage=storage).study
                c2 = time.process_time()
            tune_cpu.append(((c2 - c1) - (c1 - c0)) / (chunk - 1))
            # from the second trial on: the sampler reads the study for the first time in the
            # first trial's before_trial, after its creation
            between.append((starts_cpu[-1] - starts_cpu[1]) / (len(starts_cpu) - 2))
            if profile:
                ms_per_sample = 1000 * (c2 - c1) / max(many.samples, 1)
                outside = 0.0
                for part in set(one.counts) | set(many.counts):
                    ms = (many.counts[part] - one.counts[part]) * ms_per_sample / (chunk - 1)
                    parts[part] += ms
                    outside += 0.0 if part.endswith(SEARCH_PARTS) else ms
                framework_cpu.append(outside / 1000)
            new = [t for t in study.get_trials(deepcopy=False) if t.number >= before + 1]
            total = len(study.get_trials(deepcopy=False))
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
            statistics.median(between),
            statistics.median(framework_cpu) if framework_cpu else None,
            statistics.median(ptxas_cpu),
            len(tune_s),
            {part: ms / chunks for part, ms in parts.items()},
        )


@contextlib.contextmanager
def _trial_starts(storage: object) -> Iterator[list[float]]:
    """This process's CPU time at each trial's creation in the storage, during the block."""
    starts: list[float] = []
    create = storage.create_new_trial  # type: ignore[attr-defined]

    def timed(*args: object, **kwargs: object) -> int:
        starts.append(time.process_time())
        return create(*args, **kwargs)

    storage.create_new_trial = timed  # type: ignore[attr-defined]
    try:
        yield starts
    finally:
        del storage.create_new_trial  # type: ignore[attr-defined]


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 5000])
    parser.add_argument("--chunks", type=int, default=2)
    parser.add_argument("--chunk", type=int, default=8)
    parser.add_argument(
        "--only", nargs="*", help="sqlite sqlite-plain journal memory postgresql (default: all)"
    )
    parser.add_argument("--dir", default=None, help="work directory (default: a temporary one)")
    parser.add_argument(
        "--fill-cache", default=None, help="SQLite file of the fill trials, kept between runs (default: in --dir)"
    )
    parser.add_argument("--profile", action="store_true", help="also print where the tune CPU per trial goes")
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
    fill = Path(args.fill_cache) if args.fill_cache else work / "fill.db"
    print(f"# {' '.join(sys.argv)}")
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average {os.getloadavg()[0]:.1f}")
    print(
        "| storage | trials in study | tune s/trial | ptxas alone s | overhead ms/trial | tune / ptxas "
        "| tune CPU ms/trial (this process) | between trial starts | of which outside samplers/ | ptxas CPU ms | n |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    try:
        for key, (name, make) in storages.items():
            if args.only and key not in args.only:
                continue
            for size, t, p, tc, bc, fc, pc, n, parts in measure(
                make, args.sizes, args.chunks, args.chunk, work, fill, args.profile
            ):
                print(
                    f"| {name} | {size} | {t:.3f} | {p:.3f} | {1000 * (t - p):.0f} | {t / p:.2f} "
                    f"| {1000 * tc:.1f} | {1000 * bc:.1f} | {'-' if fc is None else f'{1000 * fc:.1f}'} | {1000 * pc:.1f} | {n} |",
                    flush=True,
                )
                if parts:
                    shown = ", ".join(f"{part} {ms:.1f}" for part, ms in sorted(parts.items(), key=lambda kv: -kv[1]))
                    print(f"<!-- CPU ms per trial by part, {name} at {size}: {shown} -->", flush=True)
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
