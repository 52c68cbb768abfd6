"""CPU per trial of each ``ciq-optuna tune`` process when 1, 2 or 4 of them share one study.

    nice -n 10 python benchmarks/tune_workers.py --fill-cache fill.db [--storage postgresql sqlite] \
        [--sizes 100 1000 5000] [--workers 1 2 4] [--chunk 24]

The real ``tune`` (stencil example, sm_90a, ``--minimize spill-bytes``, no screening, no
simplification, as ``benchmarks/overhead.py`` runs it) in W processes at once on one study
(PostgreSQL 15 started by tests/conftest.py's PostgresServer, fsync on; or a SQLite file as
``resolve_storage`` opens it). The study is first filled up to each size with the real finished
trials of ``--fill-cache`` (the SQLite fill study ``benchmarks/overhead.py`` makes, 5,000 real
compiles), copied in as rows in one transaction (Optuna's ``add_trials`` takes one transaction per
trial: too slow for 5,000 trials on PostgreSQL).

Each worker process, in turn, first runs one trial (not measured: it reads the study), then a run
of one trial alone (CPU ``c1``); then all W run together until the study holds ``W * --chunk``
more trials (CPU ``cK`` for the ``k`` trials each created). CPU per trial of that worker =
``(cK - c1) / (k - 1)``, as in overhead.py (start-up, the first read and the ACF cancel out; ptxas
runs in a child and is not in it). They cancel only in part with several workers: the measured
run's one-offs (its first read and learning of the whole study, the summary and ACF at its end)
run while the other workers run, the run of one trial alone does not. So each run also reports
the CPU per trial between the worker's second and last trial creation, which leaves them out.
The table gives the median over the workers. Wall clock is not shown: W processes on a shared
2-core machine wait for each other's compiles.

``--base ROOT --pairs N`` compares two versions of the code in one run: each size and worker
count is run N times with the base tree's code and N times with this tree's, alternately (the
pairs alternate which goes first), each run from the same study (the trials of the run before
are deleted); the summary gives the medians and the median of the per-pair ratios.
``--sqlite-workers 1`` measures SQLite with one process only (the reference of issue 12).

``--independent 4`` also runs 4 processes at once but each on a study of its own (SQLite: a file
each; PostgreSQL: a study each in the one server), filled alike and run for the same ``--chunk``:
the control that separates what W processes on the machine's cores cost each other (caches,
scheduling) from what sharing a study costs (reading and learning the others' trials).

Within each size, the runs go round the storages and worker counts (shared and independent), one
run each, ``--pairs`` times, starting one place later each round, so that slow drifts of the
machine's load fall on all of them alike.
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import optuna

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(1, str(REPO / "tests"))

from ciq_optuna.study.storage import resolve_storage  # noqa: E402

KERNEL = REPO / "examples" / "stencil" / "stencil.sm_90a.ptx"
STUDY = "workers"


def _config(trials: int, workdir: Path, seed: int, study: str = STUDY):  # type: ignore[no-untyped-def]
    from ciq_optuna.tune import TuneConfig

    return TuneConfig(
        kernel=KERNEL,
        arch="sm_90a",
        minimize=["spill-bytes"],
        trials=trials,
        study_name=study,
        workdir=workdir,
        acf=workdir / "out.acf",
        progress=False,
        simplify=False,
        screen=False,
        seed=seed,
    )


def copy_trials(storage: object, study_id: int, trials: list[optuna.trial.FrozenTrial]) -> None:
    """Insert finished ``trials`` into a study as Optuna's rows, numbered after its trials, in one
    transaction."""
    import sqlalchemy as sa
    from optuna.storages._rdb import models

    t_trials, t_params = models.TrialModel.__table__, models.TrialParamModel.__table__
    t_values, t_user = models.TrialValueModel.__table__, models.TrialUserAttributeModel.__table__
    with storage._backend.engine.begin() as conn:  # type: ignore[attr-defined]
        have = conn.execute(sa.select(sa.func.count()).select_from(t_trials).where(t_trials.c.study_id == study_id)).scalar()
        for number, t in enumerate(trials, start=have):
            utc = [d.astimezone(datetime.timezone.utc).replace(tzinfo=None) if d else None
                   for d in (t.datetime_start, t.datetime_complete)]
            trial_id = conn.execute(
                sa.insert(t_trials)
                .values(number=number, study_id=study_id, state=t.state, datetime_start=utc[0], datetime_complete=utc[1])
                .returning(t_trials.c.trial_id)
            ).scalar()
            rows = [
                {"trial_id": trial_id, "param_name": name, "param_value": t.distributions[name].to_internal_repr(value),
                 "distribution_json": optuna.distributions.distribution_to_json(t.distributions[name])}
                for name, value in t.params.items()
            ]
            if rows:
                conn.execute(sa.insert(t_params), rows)
            rows = [{"trial_id": trial_id, "key": k, "value_json": json.dumps(v)} for k, v in t.user_attrs.items()]
            if rows:
                conn.execute(sa.insert(t_user), rows)
            for objective, value in enumerate(t.values or ()):
                stored, kind = models.TrialValueModel.value_to_stored_repr(value)
                conn.execute(sa.insert(t_values).values(trial_id=trial_id, objective=objective, value=stored, value_type=kind))


def child(url: str, workdir: Path, seed: int, profile: str | None = None, study_name: str = STUDY) -> None:
    """One worker: ``one`` on stdin runs one trial alone, ``go N`` runs tune until the study holds
    N trials; each answers on stdout (JSON: CPU seconds, trials this process created). With
    ``profile`` (a path prefix) each run is profiled on a CPU clock into ``PREFIX-WORD-N.prof``."""
    import cProfile

    from ciq_optuna.tune import tune

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    logging.getLogger("ciq_optuna").setLevel(logging.ERROR)
    storage = resolve_storage(url, default_path=workdir / "x.db")
    created = [0]
    stamps: list[float] = []  # CPU time at each trial this process created
    create = storage.create_new_trial

    def counted(study_id: int, template_trial: object = None) -> int:
        if template_trial is None:
            created[0] += 1
            stamps.append(time.process_time())
        return create(study_id, template_trial)

    storage.create_new_trial = counted  # type: ignore[method-assign]
    study = optuna.load_study(storage=storage, study_name=study_name)
    for line in sys.stdin:
        word, *rest = line.split()
        n = int(rest[0]) if rest else len(study.get_trials(deepcopy=False)) + 1
        c0, k0 = time.process_time(), created[0]
        stamps.clear()
        prof = cProfile.Profile(time.process_time) if profile else None
        if prof is not None:
            prof.enable()
        tune(_config(n, workdir, seed, study_name), storage=storage)
        if prof is not None:
            prof.disable()
            prof.dump_stats(f"{profile}-{word}-{n}.prof")
        steady = (stamps[-1] - stamps[1]) / (len(stamps) - 2) if len(stamps) > 2 else None
        print(json.dumps([time.process_time() - c0, created[0] - k0, steady]), flush=True)


def _trial_count(storage: object, study_id: int) -> tuple[int, int]:
    """(trials of the study, highest trial id), read from the database."""
    import sqlalchemy as sa
    from optuna.storages._rdb import models

    trials = models.TrialModel.__table__
    with storage._backend.engine.connect() as conn:  # type: ignore[attr-defined]
        row = conn.execute(
            sa.select(sa.func.count(), sa.func.coalesce(sa.func.max(trials.c.trial_id), 0)).where(trials.c.study_id == study_id)
        ).one()
    return int(row[0]), int(row[1])


def drop_trials_after(storage: object, study_id: int, last_id: int) -> None:
    """Delete the study's trials with an id above ``last_id`` and their rows: the study is back at
    its size before a measured run, so that the next run (base or new code) starts from the same."""
    import sqlalchemy as sa
    from optuna.storages._rdb import models

    trials = models.TrialModel.__table__
    later = sa.select(trials.c.trial_id).where(trials.c.study_id == study_id, trials.c.trial_id > last_id)
    children = (models.TrialParamModel, models.TrialValueModel, models.TrialUserAttributeModel,
                models.TrialSystemAttributeModel, models.TrialIntermediateValueModel, models.TrialHeartbeatModel)
    with storage._backend.engine.begin() as conn:  # type: ignore[attr-defined]
        for model in children:
            table = model.__table__
            conn.execute(sa.delete(table).where(table.c.trial_id.in_(later)))
        conn.execute(sa.delete(trials).where(trials.c.study_id == study_id, trials.c.trial_id > last_id))


def run_workers(url: str, count: int, chunk: int, work: Path, start: int, env: dict[str, str],
                profile: str | None = None, places: list[tuple[str, str]] | None = None,
                ) -> tuple[float, float, float, list[int], float | None]:
    """W workers on the study at ``start`` trials (code from ``env``'s PYTHONPATH): median, min and
    max CPU ms per trial over the workers, the trials each created in the measured run, and the
    median over the workers of the CPU ms per trial between their second and last trial creation
    (the run's one-off costs, its first read of the study and its end, left out: they ran while
    the other workers ran, so they cost more than in the run of one trial alone the first figure
    subtracts). With ``places`` (database URL, study name) per worker, each worker runs on a study
    of its own, each at ``start`` trials, for ``chunk`` trials."""
    procs = []
    alone = places is not None
    places = places or [(url, STUDY)] * count
    for i, (where, name) in enumerate(places[:count]):
        wd = Path(tempfile.mkdtemp(prefix=f"w{i}-", dir=work))
        tag = "i" if alone else ""
        extra = ["--profile", f"{profile}-{Path(work).name}-w{count}{tag}.{i}"] if profile else []
        procs.append(subprocess.Popen(
            [sys.executable, __file__, "--child", where, "--workdir", str(wd), "--seed", str(i + 1),
             "--study", name, *extra],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
        ))
    ones = []
    for p in procs:  # in turn: the first read of the study, then one trial alone
        for _ in range(2):
            p.stdin.write("one\n")
            p.stdin.flush()
            ones.append(json.loads(p.stdout.readline()))
    sharing = 1 if alone else count
    target = start + 2 * sharing + sharing * chunk
    for p in procs:
        p.stdin.write(f"go {target}\n")
        p.stdin.flush()
    runs = [json.loads(p.stdout.readline()) for p in procs]
    for p in procs:
        p.stdin.close()
        p.wait()
    per_trial = [1000 * (cpu - one[0]) / (k - 1) for (cpu, k, _), one in zip(runs, ones[1::2]) if k > 1]
    steady = [1000 * s for _, _, s in runs if s is not None]
    return (statistics.median(per_trial), min(per_trial), max(per_trial), [k for _, k, _ in runs],
            statistics.median(steady) if steady else None)


class _Place:
    """Where a kind of run goes: a storage kind, shared or independent, and its studies (one when
    shared; one per worker when independent), each with its mark (trials, highest id) at the size."""

    def __init__(self, kind: str, independent: bool, places: list[tuple[str, str]], work: Path) -> None:
        from ciq_optuna.tune import tune

        self.kind, self.independent, self.places, self.work = kind, independent, places, work
        self.studies = []
        for url, name in places:
            storage = resolve_storage(url, default_path=work / "x.db")
            study = tune(_config(4, work, 0, name), storage=storage).study  # seed trials: the study, its attributes
            self.studies.append((storage, study._study_id))
        self.used = [0] * len(places)
        self.marks: list[tuple[int, int]] = []

    @property
    def label(self) -> str:
        return f"{self.kind}, independent" if self.independent else self.kind

    def fill_to(self, size: int, fill: list[optuna.trial.FrozenTrial]) -> int:
        """Fill each study up to ``size`` trials with the same fill trials; the trials it holds."""
        self.marks = []
        for i, (storage, sid) in enumerate(self.studies):
            have, _ = _trial_count(storage, sid)
            if size - have > 0:
                copy_trials(storage, sid, fill[self.used[i] : self.used[i] + size - have])
                self.used[i] += size - have
            self.marks.append(_trial_count(storage, sid))
        return self.marks[0][0]

    def drop(self) -> None:
        """Each study back at its mark."""
        for (storage, sid), (_, last_id) in zip(self.studies, self.marks, strict=True):
            drop_trials_after(storage, sid, last_id)


def measure(places: list[tuple[_Place, list[int]]], fill: list[optuna.trial.FrozenTrial], sizes: list[int], chunk: int,
            trees: list[tuple[str, str]], pairs: int, profile: str | None = None):
    """(place label, tree, pair, workers, trials in the study, median CPU ms per trial over the workers, min, max,
    trials per worker, median CPU ms per trial between trial creations) per run. Each run starts from its study at its
    size (the trials of the run before are deleted). Within a size, the runs go round the places and worker counts,
    starting one later each pair; with two trees, the pairs alternate which tree runs first."""
    for size in sizes:
        starts = {id(place): place.fill_to(size, fill) for place, _ in places}
        runs = [(place, count) for place, counts in places for count in counts]
        for pair in range(pairs):
            turn = pair % len(runs)
            for place, count in runs[turn:] + runs[:turn]:
                order = trees if pair % 2 == 0 else trees[::-1]
                for label, root in order:
                    env = dict(os.environ, PYTHONPATH=root)
                    url = place.places[0][0]
                    prefix = f"{profile}-{label}{pair}" if profile and (len(trees) > 1 or pairs > 1) else profile
                    med, lo, hi, ks, steady = run_workers(
                        url, count, chunk, place.work, starts[id(place)], env, prefix,
                        place.places if place.independent else None,
                    )
                    place.drop()
                    yield place.label, label, pair, count, starts[id(place)], med, lo, hi, ks, steady


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--storage", nargs="+", default=["postgresql", "sqlite"])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 5000])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--chunk", type=int, default=24, help="trials per worker in a measured run")
    parser.add_argument("--fill-cache", required=False, help="SQLite file of the fill trials (made by overhead.py)")
    parser.add_argument("--profile", help="path prefix: profile each worker's measured run (cProfile, CPU clock) "
                        "and its run of one trial into PREFIX-STORAGE-wW.I-{go,one}-N.prof, with --base or --pairs into "
                        "PREFIX-{base,new}P-... per tree and pair P (benchmarks/profile_diff.py "
                        "subtracts them per function); the CPU figures then include the profiler's cost")
    parser.add_argument("--base", help="root of a base tree (git archive BASE | tar -x): each run is made with the "
                        "base code and this tree's, alternately, --pairs times")
    parser.add_argument("--pairs", type=int, default=1, help="runs of each tree per size and worker count")
    parser.add_argument("--sqlite-workers", type=int, nargs="+", help="worker counts on SQLite (default: --workers)")
    parser.add_argument("--independent", type=int, nargs="+", default=[], help="worker counts also run each on a "
                        "study of its own (SQLite: a file each), on each storage: the control for the machine's cores")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--workdir", help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--study", default=STUDY, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, Path(args.workdir), args.seed, args.profile, args.study)
        return
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    logging.getLogger("ciq_optuna").setLevel(logging.ERROR)
    fill_storage = resolve_storage(args.fill_cache, default_path=Path(args.fill_cache))
    fill = [t for t in optuna.load_study(storage=fill_storage, study_name="fill").get_trials(deepcopy=False)
            if t.state.is_finished()]
    if len(fill) < max(args.sizes):
        raise SystemExit(f"{args.fill_cache} holds {len(fill)} fill trials; make them with benchmarks/overhead.py")
    import ciq_optuna

    new_root = str(Path(ciq_optuna.__file__).resolve().parents[1])
    trees = [("new", new_root)]
    if args.base:
        trees = [("base", str(Path(args.base).resolve())), *trees]
    print(f"# {' '.join(sys.argv)}  (trees: {', '.join(f'{label} {root}' for label, root in trees)})")
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average {os.getloadavg()[0]:.1f}")
    print("| storage | tree | pair | workers | trials in study | tune CPU ms/trial, each worker (median) | min-max "
          "| trials per worker | between trial creations (median) |")
    print("|---|---|---:|---:|---:|---:|---:|---|---:|")
    results: dict[tuple[str, int, int], dict[str, list[float]]] = {}
    steadies: dict[tuple[str, int, int], dict[str, list[float]]] = {}
    servers = []
    with tempfile.TemporaryDirectory(prefix="ciq-tune-workers-") as tmp:
        try:
            places: list[tuple[_Place, list[int]]] = []
            for kind in args.storage:
                work = Path(tempfile.mkdtemp(prefix=kind, dir=tmp))
                if kind == "postgresql":
                    from conftest import PostgresServer

                    servers.append(PostgresServer().start())
                    url = servers[-1].url()
                    own = [(url, f"{STUDY}{i}") for i in range(max(args.independent, default=0))]
                else:
                    url = f"sqlite:///{work}/s.db"
                    own = [(f"sqlite:///{work}/s{i}.db", STUDY) for i in range(max(args.independent, default=0))]
                counts = args.sqlite_workers if kind == "sqlite" and args.sqlite_workers else args.workers
                places.append((_Place(kind, False, [(url, STUDY)], work), counts))
                if own:
                    places.append((_Place(kind, True, own, work), args.independent))
            for kind, label, pair, count, size, med, lo, hi, ks, steady in measure(
                places, fill, args.sizes, args.chunk, trees, args.pairs, args.profile
            ):
                results.setdefault((kind, count, size), {}).setdefault(label, []).append(med)
                if steady is not None:
                    steadies.setdefault((kind, count, size), {}).setdefault(label, []).append(steady)
                shown = "-" if steady is None else f"{steady:.1f}"
                print(f"| {kind} | {label} | {pair} | {count} | {size} | {med:.1f} | {lo:.1f}-{hi:.1f} | {ks} "
                      f"| {shown} |", flush=True)
        finally:
            for server in servers:
                server.stop()
    print(f"\n# load average at the end {os.getloadavg()[0]:.1f}")
    _summary(results, [label for label, _ in trees])
    if steadies:
        print("\nCPU ms per trial between each worker's second and last trial creation (one-off costs left out):\n")
        _summary(steadies, [label for label, _ in trees])


def _summary(results: dict[tuple[str, int, int], dict[str, list[float]]], labels: list[str]) -> None:
    """Medians per storage, worker count and size; with two trees the median of the per-pair ratios."""
    both = len(labels) == 2
    print("| storage | workers | trials in study | " + " | ".join(f"{label} (median)" for label in labels)
          + (" | new/base per pair (median) |" if both else " |"))
    print("|---|---:|---:|" + "---:|" * (len(labels) + both))
    for (kind, count, size), runs in results.items():
        cells = [f"{statistics.median(runs[label]):.1f}" for label in labels]
        if both:
            ratios = [n / b for b, n in zip(runs["base"], runs["new"])]
            cells.append(f"{statistics.median(ratios):.2f} ({', '.join(f'{r:.2f}' for r in ratios)})")
        print(f"| {kind} | {count} | {size} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
