"""Tune every example kernel with the real ptxas (64 trials each) and print a Markdown table.

    python benchmarks/tune_examples.py [--trials 64] [--seed 0] > /tmp/tune_examples.md
    python benchmarks/tune_examples.py --work --trials 64,128 --seeds 3 --cases 0,1,2,3,4,5
    python benchmarks/tune_examples.py --work ... --compile-cache /tmp/ptxas-cache

Each run uses a fresh SQLite study in a temporary directory and the default GeneticSampler.
``--work`` runs every case, budget and seed twice, with ``GeneticSampler(binary_attr=None)`` and
with the default (binary-aware) sampler, and prints the work-saved table instead (medians over
seeds; "compiles to reach the unaware best": compiled trials, in order, until one is as good as the
best of the unaware run with the same seed and budget).  ``--compile-cache DIR`` keeps every
ptxas result (report and cubin) per kernel, architecture and argument list in DIR and replays it
when the same compile comes again (ptxas is deterministic: the same tuning runs, much faster;
compile times and the wall-clock column then mean nothing).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import pickle
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import ciq_optuna.tune as tune_module
from ciq_optuna.samplers import GeneticSampler, make_sampler
from ciq_optuna.tune import TuneConfig, tune

ROOT = Path(__file__).resolve().parents[1]
CASES = [
    ("attention", "sm_90a", ["spill-bytes"]),
    ("attention", "sm_80", ["spill-bytes"]),
    ("sgemm", "sm_90a", ["registers"]),
    ("sgemm", "sm_80", ["registers"]),
    ("stencil", "sm_90a", ["registers"]),
    ("stencil", "sm_80", ["registers"]),
    ("attention", "sm_90a", ["spill-bytes", "compile-time"]),
    ("sgemm", "sm_90a", ["registers", "spill-bytes"]),
    ("stencil", "sm_80", ["registers", "spill-bytes"]),
]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", default="64", help="trials (--work: budgets, comma-separated)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work", action="store_true", help="work-saved table, binary-aware vs not")
    parser.add_argument("--cases", default=",".join(map(str, range(len(CASES)))), help="--work: case indices")
    parser.add_argument("--seeds", type=int, default=1, help="--work: seeds from --seed on (medians over them)")
    parser.add_argument("--audit", action="store_true", help="--work: compile the skipped trials afterwards")
    parser.add_argument("--compile-cache", default=None, help="directory of cached ptxas results (see above)")
    args = parser.parse_args()
    if args.compile_cache:
        _cache_compiles(Path(args.compile_cache))
    if args.work:
        work_table(args)
        return
    args.trials = int(args.trials)
    print(
        "| kernel | arch | objective | trials (failed) | distinct binaries | de-duplicated | baseline | best "
        "| best flags | wall s |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for kernel, arch, metrics in CASES:
        res, wall = _timed_tune(kernel, arch, metrics, args)
        s = res.stats
        best = res.best[0]
        base = res.baseline.values if res.baseline else None
        fmt = ", ".join
        if len(metrics) > 1:
            front = sorted(res.best, key=lambda t: t.values)
            found = "Pareto front: " + "; ".join(f"({fmt(f'{v:g}' for v in t.values)})" for t in front)
        else:
            found = fmt(f"{v:g}" for v in best.values)
        flags = " ".join(best.user_attrs.get("flags", [])) or "(none)"
        print(
            f"| {kernel} | {arch} | {fmt(metrics)} | {s['trials']} ({s['failed']}) | {s['distinct_binaries']} | "
            f"{s['reused_measurements']} | {fmt(f'{v:g}' for v in base) if base else '-'} | {found} | "
            f"`{flags}` | {wall:.0f} |",
            flush=True,
        )


def _cache_compiles(directory: Path) -> None:
    """Replay ptxas results kept in ``directory`` (one pickle per argument list)."""
    from ciq_optuna.compilers.base import Compiler

    directory.mkdir(parents=True, exist_ok=True)
    real = Compiler.compile

    def compile(self: Compiler, source: Any, arch: str, flags: Any, *, output: Any, **kw: Any) -> Any:
        key = repr((self.info.version, Path(source).name, Path(source).read_bytes(), arch, list(flags), sorted(kw.items())))
        path = directory / f"{hashlib.sha256(key.encode()).hexdigest()[:32]}.pkl"
        if path.exists():
            result, cubin = pickle.loads(path.read_bytes())
            if cubin is not None:
                Path(output).parent.mkdir(parents=True, exist_ok=True)
                Path(output).write_bytes(cubin)
                result.cubin_path = Path(output)
            return result
        result = real(self, source, arch, flags, output=output, **kw)
        cubin = result.cubin_path.read_bytes() if result.ok and result.cubin_path else None
        # a temporary file of this process's own: two processes compiling the same key at the same
        # moment (parallel runs sharing a cache) must not rename one file twice
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(pickle.dumps((result, cubin)))
        tmp.replace(path)
        return result

    Compiler.compile = compile  # type: ignore[method-assign]


def _timed_tune(kernel: str, arch: str, metrics: list[str], args: argparse.Namespace) -> tuple[Any, float]:
    """Tune one example kernel in a throw-away study; (the result, wall seconds)."""
    with tempfile.TemporaryDirectory() as tmp:
        cfg = TuneConfig(
            kernel=ROOT / "examples" / kernel / f"{kernel}.{arch}.ptx",
            arch=arch,
            minimize=metrics,
            trials=args.trials,
            seed=args.seed,
            storage=f"sqlite:///{tmp}/s.db",
            acf=Path(tmp) / "best.acf",
            workdir=Path(tmp) / "work",
            progress=False,
        )
        start = time.monotonic()
        res = tune(cfg)
        return res, time.monotonic() - start


def work_table(args: argparse.Namespace) -> None:
    """Per case and budget, medians over seeds of the binary-aware and the unaware sampler run side
    by side: compiles run and skipped, and the compiles each needed to reach the unaware run's best
    (same seed; one objective only)."""
    budgets = [int(b) for b in str(args.trials).split(",")]
    print(
        "| kernel | arch | objective | trials | sampler | seeds | compiles run | compiles skipped "
        "| predictions checked (wrong) | distinct binaries | best (median) | same best as unaware "
        "| compiles to reach the unaware best | wall s |"
        + (" wrong skips (skipped trials compiled afterwards) |" if args.audit else "")
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|" + ("---|" if args.audit else ""))
    for kernel, arch, metrics in [CASES[int(i)] for i in args.cases.split(",")]:
        for budget in budgets:
            rows: dict[str, list[dict[str, Any]]] = {"binary-aware": [], "unaware": []}
            for seed in range(args.seed, args.seed + args.seeds):
                target = None
                for variant in ("unaware", "binary-aware"):
                    if variant == "unaware":  # make_sampler drops None-valued knobs: build it directly
                        tune_module.make_sampler = lambda n, **kw: GeneticSampler(binary_attr=None, **kw)
                    else:
                        tune_module.make_sampler = make_sampler
                    run_args = argparse.Namespace(trials=budget, seed=seed)
                    res, wall = _timed_tune(kernel, arch, metrics, run_args)
                    row = dict(res.stats["work_saved"], wall=wall)
                    if len(metrics) == 1:
                        row["best"] = res.best[0].values[0]
                        if target is None:
                            target = row["best"]
                        row["same_best"] = row["best"] <= target
                        row["to_target"] = _compiles_to(res.study, target)
                    if args.audit and variant == "binary-aware":
                        row["audit"] = _audit_skips(res.study, ROOT / "examples" / kernel / f"{kernel}.{arch}.ptx", arch)
                    rows[variant].append(row)
            for variant in ("binary-aware", "unaware"):
                _work_row(kernel, arch, metrics, budget, variant, rows[variant])
    tune_module.make_sampler = make_sampler


def _audit_skips(study: Any, kernel: Path, arch: str) -> tuple[int, int]:
    """(skipped trials, of them wrong): each skipped trial compiled after the run with its
    recorded flags, its code hash compared with the predicted one."""
    from ciq_optuna.compilers import get_compiler

    ptxas = get_compiler("ptxas")
    skipped = [t for t in study.get_trials(deepcopy=False) if t.user_attrs.get("skipped_compile")]
    wrong = 0
    for t in skipped:
        with tempfile.TemporaryDirectory() as tmp:
            res = ptxas.compile(kernel, arch, t.user_attrs["flags"], output=Path(tmp) / "out.cubin", timeout=120)
        wrong += not res.ok or res.code_hash != t.user_attrs["predicted_binary"]
    return len(skipped), wrong


def _compiles_to(study: Any, target: float) -> float:
    """Compiles run until a compiled trial reached ``target`` (inf if none did)."""
    compiles = 0
    for t in sorted(study.get_trials(deepcopy=False), key=lambda t: t.number):
        if t.user_attrs.get("skipped_compile") or "flags" not in t.user_attrs:
            continue
        compiles += 1
        if t.values is not None and t.values[0] <= target:
            return compiles
    return float("inf")


def _work_row(kernel: str, arch: str, metrics: list[str], budget: int, variant: str, runs: list[dict]) -> None:
    med = statistics.median
    share = med(r["compiles_skipped"] / r["trials"] for r in runs)
    if len(metrics) == 1:
        best = f"{med(r['best'] for r in runs):g}"
        same = f"{sum(r['same_best'] for r in runs)}/{len(runs)}"
        to_target = f"{med(r['to_target'] for r in runs):g}"
    else:
        best = same = to_target = "-"
    print(
        f"| {kernel} | {arch} | {', '.join(metrics)} | {budget} | {variant} | {len(runs)} "
        f"| {med(r['compiles_run'] for r in runs):g} | {med(r['compiles_skipped'] for r in runs):g} "
        f"({100 * share:.0f}%) | {sum(r['predictions_checked'] for r in runs)} "
        f"({sum(r['predictions_wrong'] for r in runs)}) | {med(r['distinct_binaries'] for r in runs):g} "
        f"| {best} | {same} | {to_target} | {med(r['wall'] for r in runs):.0f} |"
        + (f" {sum(r['audit'][1] for r in runs)} of {sum(r['audit'][0] for r in runs)} |" if "audit" in runs[0] else ""),
        flush=True,
    )


if __name__ == "__main__":
    main()
