"""Replay sampler searches on fully measured kernel_tuner GPU tuning spaces.

Each run asks one sampler for up to ``--budget`` configurations of one dataset (every parameter
is a ``suggest_categorical`` over its measured value list, in ``tune_params_keys`` order), looks
the configuration up and tells Optuna the measured time.  A configuration that is absent from
the cache or stored with an error string is a failed trial that still spends one evaluation.
The samplers never know the budget, so one run to 400 evaluations gives every smaller budget
from its best-so-far curve.  Every finished run is appended to a JSON-lines file at once, so a
crash loses nothing and a rerun skips what is done.

Usage (see BENCHMARKS.md for the exact commands and results)::

    nice -n 10 python benchmarks/replay.py run --out benchmarks/results/replay_so.jsonl.gz \
        --samplers genetic,random --seeds 50 --budget 400 --jobs 2
    python benchmarks/replay.py report --results benchmarks/results/replay_so.jsonl.gz
"""

from __future__ import annotations

import argparse
import gc
import gzip
import json
import math
import os
import sys
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np
import optuna
from optuna.trial import TrialState

DATA_DIR = Path(
    os.environ.get("CIQ_KT_DATA", Path(__file__).resolve().parents[2] / "shared/datasets/kernel_tuner")
)
DATASETS = ("convolution_A100", "convolution_MI250X", "dedispersion_MI250X", "gemm_RTX_3090")
BUDGETS = (25, 50, 100, 200, 400)
SO_SAMPLERS = ("genetic", "random", "tpe", "tpe_mv", "tpe_indep", "nsga2", "qmc", "qmc_default")
MO_SAMPLERS = ("genetic_mo", "nsga2_16", "random", "tpe", "tpe_mv", "nsga2")


@dataclass
class Space:
    """One kernel_tuner cache: parameter lists and the measured (time, compile_time) of valid configs."""

    name: str
    keys: list[str]
    values: dict[str, list]
    table: dict[tuple, tuple[float, float]] = field(repr=False)
    cartesian: int = 0

    @property
    def sorted_times(self) -> np.ndarray:
        return np.sort(np.array([t for t, _ in self.table.values()]))


@lru_cache(maxsize=8)
def load_space(name: str) -> Space:
    """Load ``<name>.json.gz``; invalid (error-string) records are left out of the table."""
    path = DATA_DIR / f"{name}.json.gz"
    if not path.exists():
        raise SystemExit(f"error: no dataset {name!r} in {DATA_DIR} (set CIQ_KT_DATA to its folder)")
    with gzip.open(path, "rt") as fh:
        data = json.load(fh)
    keys = list(data["tune_params_keys"])
    values = {k: list(data["tune_params"][k]) for k in keys}
    lookup = {k: {str(v): v for v in values[k]} for k in keys}
    table: dict[tuple, tuple[float, float]] = {}
    for key, rec in data["cache"].items():
        try:
            t = float(rec["time"])
        except (TypeError, ValueError):
            continue
        if not math.isfinite(t):
            continue
        parts = key.split(",")
        try:
            cfg = tuple(lookup[k][p] for k, p in zip(keys, parts))
        except KeyError:
            continue
        table[cfg] = (t, float(rec.get("compile_time", "nan")))
    cartesian = int(np.prod([len(values[k]) for k in keys]))
    return Space(name, keys, values, table, cartesian)


def random_expectation(sorted_times: np.ndarray, n_total: int, budget: int) -> float:
    """Exact E[best time] of ``budget`` draws without replacement from ``n_total`` configurations.

    Valid times are ranked 1..V, invalid configurations rank after them.  P(best rank >= i) =
    C(N-i+1, B)/C(N, B).  A search that finds no valid configuration scores the worst valid time
    (the same rule is applied to the samplers' runs).
    """
    v = len(sorted_times)
    i = np.arange(1, v + 2)
    # log C(N-i+1, B) - log C(N, B), computed with lgamma for stability.
    lg = np.vectorize(math.lgamma)

    def log_comb(n: np.ndarray, k: int) -> np.ndarray:
        n = n.astype(float)
        out = np.full(n.shape, -np.inf)
        ok = n >= k
        out[ok] = lg(n[ok] + 1) - lg(k + 1) - lg(n[ok] - k + 1)
        return out

    surv = np.exp(log_comb(n_total - i + 1, budget) - log_comb(np.array([n_total]), budget)[0])
    p_rank = surv[:-1] - surv[1:]  # P(best rank == i) for i = 1..V
    p_none = surv[-1]
    return float(np.dot(p_rank, sorted_times) + p_none * sorted_times[-1])


def build_sampler(name: str, seed: int, n_objectives: int = 1) -> optuna.samplers.BaseSampler:
    """The samplers compared in the benchmark, by short name."""
    s = optuna.samplers
    if name.startswith("genetic:"):  # a variant for tuning, e.g. genetic:stall=3+epoch=4
        return genetic_variant(name, seed)
    if name.startswith("genetic@"):  # the sampler package at a commit, e.g. genetic@173bc19
        return genetic_at(name.split("@", 1)[1])(seed=seed)
    if name == "genetic":
        from ciq_optuna.samplers import GeneticSampler

        return GeneticSampler(seed=seed)
    if name == "genetic_mo":
        from ciq_optuna.samplers import GeneticSampler

        return GeneticSampler(seed=seed)
    if name == "random":
        return s.RandomSampler(seed=seed)
    if name == "tpe":
        return s.TPESampler(seed=seed)
    if name == "tpe_mv":
        return s.TPESampler(seed=seed, multivariate=True)
    if name == "nsga2":
        return s.NSGAIISampler(seed=seed)
    if name == "nsga2_16":  # what make_sampler returns for several objectives
        return s.NSGAIISampler(seed=seed, population_size=16)
    if name == "tpe_indep":
        return s.TPESampler(seed=seed, multivariate=False)
    if name == "qmc":
        return s.QMCSampler(seed=seed, scramble=True)
    if name == "qmc_default":  # Optuna's default: an unscrambled Sobol sequence, the same for every seed
        return s.QMCSampler(seed=seed)
    if name == "gp":
        return s.GPSampler(seed=seed)
    raise SystemExit(f"error: unknown sampler {name!r}")


GENETIC_KNOBS = {
    "stall": "_stall_gens",
    "epoch": "_epoch_gens",
    "eglobal": "_epoch_global",
    "explore": "_explore_share",
    "cands": "_n_candidates",
    "sur": "_surrogate",
    "gamma": "_gamma",
    "top": "_knn_top",
    "fw": "_fail_weight",
    "mixg": "_mix_gens",
    "kc": "_knn_cands",
    "ls": "_ls_share",
    "lss": "_ls_stall",
    "lsg": "_ls_gens",
    "lsr": "_ls_risk",
    "lsd": "_ls_depth",
    "lsn": "_ls_survivors",
    "lsre": "_ls_restart",
    "lsrs": "_ls_restart_share",  # with lsre: share of local-search trials while a restart runs
    "lsrf": "_ls_restart_fail",  # with lsre: local search in a restart only below this failure share
    "lskd": "_ls_keep_drawn",  # finished trials a neighbourhood with random draws is kept (0: drawn every time)
    "lsk": "_ls_keep",
    "lsp": "_ls_pairs",  # two-gene moves: the pairs of the best one-gene moves passed to the pick (0: off)
    "lspu": "_ls_pair_unknown",
    "g0": "_g0_guide",
    "fill": "_g0_fill",
    "batch": "_child_batch",  # children bred at once per elite (time per trial)
    "sums": "_pairwise_sums",  # 1: gene distances summed in numpy's pairwise order, 0: gene by gene
    "draws": "_draws",  # "pcg" (numpy Generator, only the numbers used) or "legacy" (RandomState blocks)
    "ties": "_first_ties",  # 1: nearest neighbours at equal distances: the earliest trials
    "win": "_window",  # latest trials the nearest-neighbour pick compares with (time per trial)
    "g0s": "_g0_sobol",
    "g0b": "_g0_breed",
    "lsfix": "_ls_repair",
    "lsw": "_ls_window",
    "ls2": "_ls_two",
    "pw": "_pair_weight",
    "pf": "_pair_fail",
    "g0f": "_g0_safe",
    "g0a": "_g0_every",
    "g0x": "_g0_spread",
    "g0q": "_g0_qmc",
    "pfg": "_pair_fail_gens",
}


def _knob_value(value: str) -> int | float | str:
    for kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            pass
    return value


def genetic_variant(name: str, seed: int) -> optuna.samplers.BaseSampler:
    """GeneticSampler with internal constants changed: ``genetic:stall=3+epoch=4+explore=0.5``
    (``stall=0`` turns restarts off)."""
    from ciq_optuna.samplers import GeneticSampler

    sampler = GeneticSampler(seed=seed)
    for item in name.split(":", 1)[1].split("+"):
        key, value = item.split("=")
        if key not in GENETIC_KNOBS:
            raise SystemExit(f"error: unknown GeneticSampler knob {key!r} (known: {', '.join(GENETIC_KNOBS)})")
        setattr(sampler, GENETIC_KNOBS[key], _knob_value(value))
    if sampler._stall_gens == 0:
        sampler._stall_gens = 10**9
    return sampler


@lru_cache(maxsize=4)
def genetic_at(rev: str) -> type:
    """GeneticSampler as the package ``ciq_optuna/samplers`` was at commit ``rev`` (``git
    archive``: every module of the sampler, so a change of a helper module such as
    ``_distance.py`` is compared too), imported beside this tree's under a private name, so the
    two can be timed round robin in one process."""
    import importlib
    import io
    import subprocess
    import tarfile
    import tempfile

    root = Path(__file__).resolve().parents[1]
    archive = subprocess.run(
        ["git", "-C", str(root), "archive", rev, "ciq_optuna/samplers"], check=True, capture_output=True
    ).stdout
    name = f"genetic_at_{rev.replace('-', '_').replace('/', '_')}"
    folder = Path(tempfile.mkdtemp(prefix="genetic-at-"))
    (folder / name).mkdir()
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        for member in tar.getmembers():
            if member.isfile() and member.name.endswith(".py"):
                text = tar.extractfile(member).read().decode()
                (folder / name / Path(member.name).name).write_text(text.replace("ciq_optuna.samplers", name))
    sys.path.insert(0, str(folder))
    try:
        return importlib.import_module(f"{name}._genetic").GeneticSampler
    finally:
        sys.path.remove(str(folder))


def replay(
    space: Space,
    sampler: optuna.samplers.BaseSampler,
    n_trials: int,
    n_objectives: int = 1,
    per_trial: list[float] | None = None,
    per_trial_cpu: list[float] | None = None,
) -> tuple[list, float]:
    """Run ``n_trials`` ask/tell steps; returns the per-trial results (None = failed) and the
    seconds spent outside the table look-up (the sampler's own time plus Optuna's); ``per_trial``
    and ``per_trial_cpu`` collect that time per trial, wall-clock and CPU of this thread."""
    run = _Run(space, sampler, n_objectives)
    run.steps(n_trials)
    if per_trial is not None:
        per_trial.extend(run.wall)
    if per_trial_cpu is not None:
        per_trial_cpu.extend(run.cpu)
    return run.out, float(sum(run.wall))


class _Run:
    """One replayed study, advanced a trial at a time (so several can take turns)."""

    def __init__(self, space: Space, sampler: optuna.samplers.BaseSampler, n_objectives: int = 1) -> None:
        self.space, self.n_objectives = space, n_objectives
        self.study = optuna.create_study(directions=["minimize"] * n_objectives, sampler=sampler)
        self.out: list = []
        self.wall: list[float] = []  # per trial: seconds outside the table look-up
        self.cpu: list[float] = []  # the same, CPU time of this thread

    def steps(self, n: int) -> bool:
        """Up to ``n`` ask/tell steps; False once the study has stopped."""
        return all(self.step() for _ in range(n))

    def step(self) -> bool:
        """One ask/tell step; False once the study has stopped (nothing left to propose)."""
        study, space = self.study, self.space
        c0 = time.thread_time()
        t0 = time.perf_counter()
        trial = study.ask()
        try:
            cfg = tuple(trial.suggest_categorical(k, space.values[k]) for k in space.keys)
        except optuna.TrialPruned:
            study.tell(trial, state=TrialState.PRUNED)
            return False
        t1, c1 = time.perf_counter(), time.thread_time()
        rec = space.table.get(cfg)
        c2 = time.thread_time()
        t2 = time.perf_counter()  # the CPU clock is read outside the wall-clock intervals
        if rec is None:
            study.tell(trial, state=TrialState.FAIL)
            self.out.append(None)
        else:
            value = rec[0] if self.n_objectives == 1 else list(rec[: self.n_objectives])
            study.tell(trial, value)
            self.out.append(value)
        self.wall.append((t1 - t0) + (time.perf_counter() - t2))
        self.cpu.append((c1 - c0) + (time.thread_time() - c2))
        return not study._stop_flag


def _job(args: tuple) -> dict:
    dataset, sampler_name, seed, budget, n_obj = args
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    warnings.simplefilter("ignore")
    space = load_space(dataset)
    sampler = build_sampler(sampler_name, seed, n_obj)
    results, spent = replay(space, sampler, budget, n_obj)
    return {
        "dataset": dataset,
        "sampler": sampler_name,
        "seed": seed,
        "n_objectives": n_obj,
        "results": results,
        "seconds": spent,
    }


def _read_text(path: Path) -> str:
    """A results file, plain or gzipped (``.gz``: appended runs are gzip members)."""
    if path.suffix == ".gz":
        with gzip.open(path, "rt") as fh:
            return fh.read()
    return path.read_text()


def _open_append(path: Path):  # noqa: ANN202 - a text file object
    return gzip.open(path, "at") if path.suffix == ".gz" else path.open("a")


def _done(path: Path) -> set[tuple]:
    done = set()
    if path.exists():
        for line in _read_text(path).splitlines():
            try:
                r = json.loads(line)
            except json.JSONDecodeError:
                continue
            done.add((r["dataset"], r["sampler"], r["seed"], r["n_objectives"]))
    return done


def cmd_run(args: argparse.Namespace) -> None:
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    done = _done(out)
    jobs = [
        (d, s, seed, args.budget, args.objectives)
        for seed in range(args.seed0, args.seed0 + args.seeds)
        for s in args.samplers.split(",")
        for d in args.datasets.split(",")
        if (d, s, seed, args.objectives) not in done
    ]
    print(f"{len(jobs)} runs to do, {len(done)} already in {out}", flush=True)
    t0 = time.time()
    with _open_append(out) as fh:
        if args.jobs <= 1:
            it: Iterable[dict] = map(_job, jobs)
        else:
            pool = get_context("fork").Pool(args.jobs, maxtasksperchild=20)
            it = pool.imap_unordered(_job, jobs)
        for n, r in enumerate(it, 1):
            fh.write(json.dumps(r) + "\n")
            fh.flush()
            if n % 10 == 0 or n == len(jobs):
                print(f"{n}/{len(jobs)} runs, {time.time() - t0:.0f} s", flush=True)


# ---------------------------------------------------------------- scoring


def best_curve(results: list, worst: float) -> np.ndarray:
    """Best-so-far time after each evaluation; ``worst`` until a valid one is found.  A run that
    stopped early (space exhausted) keeps its last best for the remaining budget."""
    vals = np.array([worst if r is None else min(float(r), worst) for r in results] or [worst])
    return np.minimum.accumulate(vals)


def at_budget(curve: np.ndarray, b: int) -> float:
    return float(curve[min(b, len(curve)) - 1])


def methodology_score(dataset: str, sorted_times: np.ndarray, n_total: int, best: float, budget: int, cache: dict) -> float:
    """The methodology score of ``best`` found within ``budget`` evaluations: 0 for random search's
    expectation at that budget, 1 for the optimum (``cache``: the expectations, per dataset and budget)."""
    key = (dataset, budget)
    if key not in cache:
        cache[key] = random_expectation(sorted_times, n_total, budget)
    e = cache[key]
    return (e - best) / (e - sorted_times[0])


def so_curves(rows: list[dict]) -> Iterator[tuple[dict, Any, np.ndarray, list[float]]]:
    """(row, space, its sorted times, the row's best-so-far curve) of each single-objective row."""
    for r in rows:
        if r["n_objectives"] != 1:
            continue
        sp = load_space(r["dataset"])
        st = sp.sorted_times
        yield r, sp, st, best_curve(r["results"], float(st[-1]))


def so_table(rows: list[dict], budgets: Iterable[int] = BUDGETS) -> dict:
    """Per dataset and sampler: mean score, fraction of optimum and failed rate per budget."""
    out: dict = {}
    exp_cache: dict = {}
    for r, sp, st, curve in so_curves(rows):
        d = out.setdefault(r["dataset"], {}).setdefault(r["sampler"], {})
        for b in budgets:
            best = at_budget(curve, b)
            used = r["results"][:b]
            cell = d.setdefault(b, {"score": [], "frac": [], "fail": [], "seconds": []})
            cell["score"].append(methodology_score(r["dataset"], st, sp.cartesian, best, b, exp_cache))
            cell["frac"].append(st[0] / best)
            cell["fail"].append(sum(x is None for x in used) / max(1, len(used)))
        d.setdefault("seconds", []).append(r["seconds"] / max(1, len(r["results"])))
        flat = at_budget(curve, 200) == at_budget(curve, 400)
        d.setdefault("flat", []).append(flat)
        d.setdefault("flat_below", []).append(flat and at_budget(curve, 400) > st[0])
    return out


def loo_table(rows: list[dict], candidates: list[str], budgets: Iterable[int] = (50, 100, 200, 400)) -> list[str]:
    """Leave one dataset out: for each dataset, the candidate with the best mean score over the
    other datasets (mean over ``budgets``), and that candidate's scores on the held-out one."""
    so = so_table(rows)
    budgets = list(budgets)

    def mean_score(ds: str, cand: str) -> float:
        return float(np.mean([np.mean(so[ds][cand][b]["score"]) for b in budgets]))

    datasets = sorted(d for d in so if all(c in so[d] for c in candidates))
    lines = [
        "| held-out dataset | chosen on the other datasets | " + " | ".join(f"held-out score at {b}" for b in budgets) + " |",
        "|---|---|" + "---|" * len(budgets),
    ]
    for held in datasets:
        train = [d for d in datasets if d != held]
        best = max(candidates, key=lambda c: np.mean([mean_score(d, c) for d in train]))
        cells = [f"{np.mean(so[held][best][b]['score']):.3f}" for b in budgets]
        lines.append(f"| {held} | {best} | " + " | ".join(cells) + " |")
    return lines


def hv2d(points: np.ndarray, ref: np.ndarray) -> float:
    """Hypervolume of 2-D minimisation points below ``ref``."""
    pts = points[np.all(points < ref, axis=1)]
    if len(pts) == 0:
        return 0.0
    pts = pts[np.lexsort((pts[:, 1], pts[:, 0]))]
    hv, y_prev = 0.0, ref[1]
    for x, y in pts:
        if y < y_prev:
            hv += (ref[0] - x) * (y_prev - y)
            y_prev = y
    return hv


def mo_reference(space: Space) -> tuple[np.ndarray, np.ndarray, float]:
    """Normalisation by the true Pareto front (its ideal point -> 0, its nadir point -> 1) and
    the true front's hypervolume up to the reference point (1.1, 1.1) of that scale: points worse
    than the front's nadir plus 10% in an objective add nothing, so the ratio is not dominated by
    the easy part of the space."""
    pts = np.array(list(space.table.values()))
    pts = pts[np.lexsort((pts[:, 1], pts[:, 0]))]
    front = pts[np.r_[True, np.minimum.accumulate(pts[:, 1])[1:] < np.minimum.accumulate(pts[:, 1])[:-1]]]
    lo, hi = front.min(axis=0), front.max(axis=0)
    norm = (front - lo) / np.where(hi > lo, hi - lo, 1.0)
    return lo, hi, hv2d(norm, np.array([1.1, 1.1]))


def mo_table(rows: list[dict], budgets: Iterable[int] = BUDGETS) -> dict:
    """Per dataset and sampler: mean hypervolume ratio (found / true front) per budget."""
    out: dict = {}
    refs: dict = {}
    for r in rows:
        if r["n_objectives"] != 2:
            continue
        sp = load_space(r["dataset"])
        if r["dataset"] not in refs:
            refs[r["dataset"]] = mo_reference(sp)
        lo, hi, hv_true = refs[r["dataset"]]
        d = out.setdefault(r["dataset"], {}).setdefault(r["sampler"], {})
        for b in budgets:
            used = [x for x in r["results"][:b] if x is not None]
            hv = 0.0
            if used:
                norm = (np.array(used) - lo) / np.where(hi > lo, hi - lo, 1.0)
                hv = hv2d(norm, np.array([1.1, 1.1]))
            cell = d.setdefault(b, {"hv": [], "fail": []})
            cell["hv"].append(hv / hv_true)
            cell["fail"].append(sum(x is None for x in r["results"][:b]) / max(1, min(b, len(r["results"]))))
    return out


def _load_rows(paths: list[str]) -> list[dict]:
    """Rows of the result files; ``FILE#a,b`` keeps only the rows of samplers a and b (for
    instance the Optuna samplers of a file whose GeneticSampler rows an older version made);
    ``FILE@tag`` names its samplers ``name (tag)`` (rows of one sampler made by two versions)."""
    rows = []
    for p in paths:
        p, _, tag = p.partition("@")
        path, _, only = p.partition("#")
        keep = set(only.split(",")) if only else None
        for line in _read_text(Path(path)).splitlines():
            if line.strip():
                r = json.loads(line)
                if keep is None or r["sampler"] in keep:
                    if tag:
                        r["sampler"] = f"{r['sampler']} ({tag})"
                    rows.append(r)
    return rows


def cmd_report(args: argparse.Namespace) -> None:
    rows = _load_rows(args.results)
    lines: list[str] = []
    so = so_table(rows)
    metric_names: list[tuple[str, str, Callable]] = [
        ("score", "methodology score (mean over seeds)", lambda v: f"{np.mean(v):.3f}"),
        ("frac", "fraction of optimum (mean)", lambda v: f"{np.mean(v):.3f}"),
        ("fail", "failed-evaluation rate (mean)", lambda v: f"{np.mean(v):.2f}"),
    ]
    for metric, title, fmt in metric_names:
        if not so:
            break
        lines.append(f"\n**{title}**\n")
        lines.append("| dataset | sampler | seeds | " + " | ".join(str(b) for b in BUDGETS) + " |")
        lines.append("|---|---|---|" + "---|" * len(BUDGETS))
        for ds in sorted(so):
            for sname in [s for s in (*SO_SAMPLERS, "gp") if s in so[ds]] + sorted(
                s for s in so[ds] if s not in (*SO_SAMPLERS, "gp")
            ):
                d = so[ds][sname]
                n = len(d[BUDGETS[0]]["score"])
                cells = [fmt(d[b][metric]) if b in d else "" for b in BUDGETS]
                lines.append(f"| {ds} | {sname} | {n} | " + " | ".join(cells) + " |")
    if so:
        lines.append("\n**stagnation: share of seeds whose best did not change from 200 to 400 evaluations "
                     "(in brackets: and still above the optimum)**\n")
        lines.append("| dataset | sampler | seeds | same best at 200 and 400 |")
        lines.append("|---|---|---|---|")
        for ds in sorted(so):
            for sname in [s for s in (*SO_SAMPLERS, "gp") if s in so[ds]] + sorted(
                s for s in so[ds] if s not in (*SO_SAMPLERS, "gp")
            ):
                d = so[ds][sname]
                lines.append(
                    f"| {ds} | {sname} | {len(d['flat'])} | {np.mean(d['flat']):.2f} ({np.mean(d['flat_below']):.2f}) |"
                )
    if args.loo:
        lines.append("\n**leave one dataset out**\n")
        lines += loo_table(rows, args.loo.split(";"))
    mo = mo_table(rows)
    if mo:
        lines.append("\n**hypervolume / true front's hypervolume (mean over seeds)**\n")
        lines.append("| dataset | sampler | seeds | " + " | ".join(str(b) for b in BUDGETS) + " |")
        lines.append("|---|---|---|" + "---|" * len(BUDGETS))
        for ds in sorted(mo):
            for sname in [s for s in MO_SAMPLERS if s in mo[ds]] + sorted(s for s in mo[ds] if s not in MO_SAMPLERS):
                d = mo[ds][sname]
                n = len(d[BUDGETS[0]]["hv"])
                cells = [f"{np.mean(d[b]['hv']):.3f}" for b in BUDGETS]
                lines.append(f"| {ds} | {sname} | {n} | " + " | ".join(cells) + " |")
    if args.timing and Path(args.timing).exists():
        lines.append("\n**sampler time per trial (ms; ask + suggest + tell, in-memory storage)**\n")
        lines.append(
            "| sampler | dataset | trials in the study | runs "
            "| ms per trial, mean over the study (median of runs) | ms per trial, last 100 trials (median) |"
        )
        lines.append("|---|---|---|---|---|---|")
        groups: dict[tuple, list[dict]] = {}
        for line in Path(args.timing).read_text().splitlines():
            r = json.loads(line)
            groups.setdefault((r["trials"], r["sampler"], r["dataset"]), []).append(r)
        for (n, name, ds), recs in sorted(groups.items()):
            mean = np.median([r["ms_per_trial"] for r in recs])
            last = np.median([r["ms_per_trial_last100"] for r in recs])
            lines.append(f"| {name} | {ds} | {n} | {len(recs)} | {mean:.2f} | {last:.2f} |")
        lines += _cpu_table(groups)
        lines += _window_table(groups)
        if args.base:
            lines += _window_table(groups, args.base)
    print("\n".join(lines))


def _cpu_table(groups: dict[tuple, list[dict]]) -> list[str]:
    """CPU time per trial (runs that recorded it) and its ratio to NSGA-II's round by round (the
    runs of one round ran one after the other, so a change of the machine's load hits both)."""
    lines = [
        "\n**CPU time per trial (ms of this thread; medians of runs; ratio to nsga2: median of the "
        "per-round ratios)**\n",
        "| sampler | dataset | trials in the study | runs | CPU ms per trial, mean over the study "
        "| CPU ms per trial, last 100 trials | / nsga2 (mean over the study) | / nsga2 (last 100) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    found = False
    for (n, name, ds), recs in sorted(groups.items()):
        recs = [r for r in recs if "cpu_ms_per_trial" in r]
        if not recs:
            continue
        found = True
        ref = {r["repeat"]: r for r in groups.get((n, "nsga2", ds), []) if "cpu_ms_per_trial" in r}
        ratios = []
        for key in ("cpu_ms_per_trial", "cpu_ms_per_trial_last100"):
            per_round = [r[key] / ref[r["repeat"]][key] for r in recs if r["repeat"] in ref]
            ratios.append(f"{np.median(per_round):.2f}" if per_round and name != "nsga2" else "")
        mean = np.median([r["cpu_ms_per_trial"] for r in recs])
        last = np.median([r["cpu_ms_per_trial_last100"] for r in recs])
        lines.append(f"| {name} | {ds} | {n} | {len(recs)} | {mean:.3f} | {last:.3f} | {ratios[0]} | {ratios[1]} |")
    return lines if found else []


def _windows(cpu: list[float], edges: list[int]) -> dict[str, float]:
    """CPU ms per trial in the study-size windows that start at ``edges`` (the last one runs to
    the end of the study): e.g. ``{"0-99": 1.1, "100-299": 1.3, ...}``."""
    out = {}
    for i, start in enumerate(edges):
        end = min(edges[i + 1] if i + 1 < len(edges) else len(cpu), len(cpu))
        if start < end:
            out[f"{start}-{end - 1}"] = 1000 * float(np.mean(cpu[start:end]))
    return out


def _window_values(r: dict) -> dict[str, float]:
    """A timing record's CPU ms per trial: over the study, its last 100 trials and each window."""
    return {"study": r["cpu_ms_per_trial"], "last 100": r["cpu_ms_per_trial_last100"], **r["cpu_ms_windows"]}


def _window_table(groups: dict[tuple, list[dict]], ref_name: str = "nsga2") -> list[str]:
    """CPU ms per trial over the study, its last 100 trials and by study-size window (median of
    runs), and the ratio to ``ref_name``'s in the same round: the median of the per-round ratios,
    the rounds in brackets (in the order of their seeds)."""
    lines: list[str] = []
    for (n, name, ds), recs in sorted(groups.items()):
        recs = sorted((r for r in recs if "cpu_ms_windows" in r), key=lambda r: r["repeat"])
        if not recs:
            continue
        ref = {r["repeat"]: _window_values(r) for r in groups.get((n, ref_name, ds), []) if "cpu_ms_windows" in r}
        wins = list(_window_values(recs[0]))
        if not lines:
            lines = [
                f"\n**CPU ms per trial over the study, its last 100 trials and by study-size window (trials); "
                f"median of runs; / {ref_name}: median of the per-round ratios, the rounds in brackets**\n",
                "| sampler | dataset | trials | " + " | ".join(wins) + " |",
                "|---|---|---|" + "---|" * len(wins),
            ]
        cells = []
        for w in wins:
            cell = f"{np.median([_window_values(r)[w] for r in recs]):.3f}"
            per_round = [_window_values(r)[w] / ref[r["repeat"]][w] for r in recs if r["repeat"] in ref]
            if per_round and name != ref_name:
                cell += f" **{np.median(per_round):.2f}** (" + ", ".join(f"{x:.2f}" for x in per_round) + ")"
            cells.append(cell)
        lines.append(f"| {name} | {ds} | {n} | " + " | ".join(cells) + " |")
    return lines


def _collect(collect: bool) -> None:
    """With ``collect``, a full garbage collection now, outside the timed steps.

    The studies of a round share one heap, and a full (oldest-generation) collection walks all of
    it, charged to whichever study's trial triggers it, the largest noise in the per-round ratios
    (BENCHMARKS.md, "The timing's noise").  The younger generations, which a study's own
    allocations fill, are still collected (and timed) during its turn."""
    if collect:
        gc.collect()


def cmd_timing(args: argparse.Namespace) -> None:
    """Sampler time per trial (ask + suggest + tell, in-memory storage) on one dataset."""
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    warnings.simplefilter("ignore")
    space = load_space(args.dataset)
    out = Path(args.out)
    names = args.samplers.split(",")
    edges = [int(x) for x in args.windows.split(",")]
    for n in [int(x) for x in args.trials.split(",")]:
        for rep in range(args.round0, args.round0 + args.repeat):  # round robin: the load hits every sampler
            if args.interleave:  # the studies of a round take turns, ``--interleave`` trials at a time
                runs = {name: _Run(space, build_sampler(name, rep)) for name in names}
                active = list(runs.values())
                for start in range(0, n, args.interleave):
                    block = min(args.interleave, n - start)
                    going = []
                    for run in active:
                        _collect(args.collect)
                        if run.steps(block):
                            going.append(run)
                    active = going
            else:
                runs = {}
                for name in names:
                    runs[name] = _Run(space, build_sampler(name, rep))
                    _collect(args.collect)
                    runs[name].steps(n)
            for name, run in runs.items():
                rec = {
                    "sampler": name,
                    "dataset": args.dataset,
                    "trials": len(run.out),
                    "repeat": rep,
                    "ms_per_trial": 1000 * float(np.sum(run.wall)) / len(run.out),
                    "ms_per_trial_last100": 1000 * float(np.mean(run.wall[-100:])),
                    "cpu_ms_per_trial": 1000 * float(np.sum(run.cpu)) / len(run.out),
                    "cpu_ms_per_trial_last100": 1000 * float(np.mean(run.cpu[-100:])),
                    "cpu_ms_windows": _windows(run.cpu, edges),
                    **({"interleaved": args.interleave} if args.interleave else {}),
                    **({"collected": True} if args.collect else {}),
                }
                print(json.dumps(rec), flush=True)
                with out.open("a") as fh:
                    fh.write(json.dumps(rec) + "\n")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run replays, append to a JSON-lines file")
    r.add_argument("--out", required=True)
    r.add_argument("--datasets", default=",".join(DATASETS))
    r.add_argument("--samplers", default=",".join(SO_SAMPLERS))
    r.add_argument("--seeds", type=int, default=50)
    r.add_argument("--seed0", type=int, default=0)
    r.add_argument("--budget", type=int, default=400)
    r.add_argument("--objectives", type=int, default=1, choices=(1, 2))
    r.add_argument("--jobs", type=int, default=2)
    p = sub.add_parser("report", help="markdown tables from result files")
    p.add_argument("--results", nargs="+", required=True, help="result files (FILE#a,b: only samplers a, b; FILE@tag: names 'sampler (tag)')")
    p.add_argument("--timing", help="JSON-lines file written by the timing command")
    p.add_argument("--base", help="with --timing: also the CPU ratios to this sampler (e.g. genetic@28df099)")
    p.add_argument("--loo", help="candidate samplers separated by ';': leave-one-dataset-out choice")
    t = sub.add_parser("timing", help="sampler time per trial")
    t.add_argument("--dataset", default="gemm_RTX_3090")
    t.add_argument("--samplers", default="genetic,nsga2,random")
    t.add_argument("--trials", default="1000,5000")
    t.add_argument("--repeat", type=int, default=3)
    t.add_argument("--round0", type=int, default=0, help="number (and seed) of the first round")
    t.add_argument("--out", required=True)
    t.add_argument("--windows", default="0,100,300,600",
                   help="first trials of the study-size windows whose CPU per trial is recorded apart")
    t.add_argument("--interleave", type=int, default=0, metavar="K",
                   help="the samplers' studies of a round take turns, K trials at a time (0: one study after the other)")
    t.add_argument("--collect", action="store_true",
                   help="a full garbage collection (not timed) before each turn: the shared heap's "
                   "oldest-generation collections are not charged to whichever study triggers them")
    args = ap.parse_args(argv)
    if args.cmd == "run" and args.jobs > 2:
        sys.exit("error: at most 2 parallel jobs on this shared machine")
    {"run": cmd_run, "report": cmd_report, "timing": cmd_timing}[args.cmd](args)


if __name__ == "__main__":
    main()
