"""Compile landscapes of the example kernels, and offline tuning replays on them.

``enumerate`` compiles every configuration of a 6-control ptxas space once with the real ptxas
and caches spills, registers and the code hash (``.note.nv.tkinfo`` ignored) per configuration
in a gzipped JSON file.  ``replay`` then tunes on that landscape offline, as
``ciq-optuna tune`` would (baseline first, then the GeneticSampler), with and without binary
awareness: a trial the sampler predicts to give a binary already measured is not compiled and
takes that binary's values (as the compile objective does with ``skip_compile``).  It reports
the best value at 32/64/128 trials, the compiles run and skipped, and the compiles needed to
reach the landscape's optimum.

    nice -n 10 python benchmarks/compile_landscape.py enumerate --jobs 2
    python benchmarks/compile_landscape.py replay --seeds 20
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import statistics
import sys
import tempfile
import time
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import optuna

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
KERNELS = ("attention", "sgemm", "stencil")
ARCH = "sm_90a"
# name, flag template, values (None = not passed)
CONTROLS: list[tuple[str, str, list[Any]]] = [
    ("opt_level", "-O{}", [None, 0, 1, 2, 3]),
    ("maxrregcount", "--maxrregcount={}", [None, 32, 64, 96, 128]),
    ("register_usage_level", "--register-usage-level={}", [None, 0, 10]),
    ("fmad", "--fmad={}", [None, "true", "false"]),
    ("def_load_cache", "-dlcm={}", [None, "cg", "cs"]),
    ("allow_expensive_optimizations", "--allow-expensive-optimizations={}", [None, "true", "false"]),
]
# Per kernel, the objective of tune_examples.py with the other metric as a tie-breaker:
# attention: fewest spill bytes, then fewest registers; sgemm and stencil: fewest registers, then
# fewest spill bytes.
OBJECTIVE = {
    "attention": "spill-bytes, then registers",
    "sgemm": "registers, then spill-bytes",
    "stencil": "registers, then spill-bytes",
}


def objective_value(kernel: str, rec: dict) -> float:
    if OBJECTIVE[kernel].startswith("spill"):
        return 1000.0 * rec["spill-bytes"] + rec["registers"]
    return 100000.0 * rec["registers"] + rec["spill-bytes"]


BUDGETS = (32, 64, 128)


def landscape_path(kernel: str) -> Path:
    return RESULTS / f"landscape_{kernel}.{ARCH}.json.gz"


def flags_of(config: tuple) -> list[str]:
    return [tpl.format(v) for (_, tpl, _), v in zip(CONTROLS, config) if v is not None]


def _compile_one(args: tuple) -> tuple[str, dict]:
    kernel, idx = args
    from ciq_optuna.compilers import get_compiler
    from ciq_optuna.objectives.metrics import compile_metrics

    ptxas = get_compiler("ptxas", release="13.0")
    config = tuple(CONTROLS[j][2][i] for j, i in enumerate(idx))
    ptx = ROOT / "examples" / kernel / f"{kernel}.{ARCH}.ptx"
    with tempfile.TemporaryDirectory(prefix="ciq-landscape-") as tmp:
        res = ptxas.compile(ptx, ARCH, flags_of(config), output=Path(tmp) / "out.cubin", timeout=120)
    key = ",".join(map(str, idx))
    if not res.ok:
        return key, {"ok": False, "error": res.error}
    m = compile_metrics(res)
    return key, {
        "ok": True,
        "hash": res.code_hash[:16],
        "spill-bytes": m["spill-bytes"],
        "registers": m["registers"],
    }


def cmd_enumerate(args: argparse.Namespace) -> None:
    from ciq_optuna.compilers import get_compiler

    version = get_compiler("ptxas", release="13.0").info.version
    for kernel in args.kernels.split(","):
        out = landscape_path(kernel)
        if out.exists():
            print(f"{out} exists, skipped", flush=True)
            continue
        grid = list(itertools.product(*[range(len(v)) for _, _, v in CONTROLS]))
        t0 = time.time()
        configs: dict[str, dict] = {}
        with get_context("fork").Pool(args.jobs) as pool:
            for n, (key, rec) in enumerate(
                pool.imap_unordered(_compile_one, [(kernel, i) for i in grid], 8), 1
            ):
                configs[key] = rec
                if n % 200 == 0 or n == len(grid):
                    print(f"{kernel}: {n}/{len(grid)} compiles, {time.time() - t0:.0f} s", flush=True)
        data = {
            "kernel": kernel,
            "arch": ARCH,
            "ptxas": version,
            "controls": [{"name": n, "flag": f, "values": v} for n, f, v in CONTROLS],
            "seconds": round(time.time() - t0, 1),
            "configs": configs,
        }
        out.parent.mkdir(parents=True, exist_ok=True)
        with gzip.open(out, "wt") as fh:
            json.dump(data, fh)
        print(f"wrote {out}", flush=True)


def load_landscape(kernel: str) -> dict:
    path = landscape_path(kernel)
    if not path.exists():
        raise SystemExit(f"error: no landscape {path}: run the enumerate command first")
    with gzip.open(path, "rt") as fh:
        return json.load(fh)


VARIANTS = ("unaware", "aware", "aware_avoid")


def _sampler(variant: str, seed: int) -> optuna.samplers.BaseSampler:
    from ciq_optuna.samplers import GeneticSampler

    if variant == "unaware":
        return GeneticSampler(seed=seed, binary_attr=None)
    sampler = GeneticSampler(seed=seed)
    sampler._avoid_repeats = variant == "aware_avoid"
    return sampler


def replay_one(land: dict, variant: str, seed: int, budget: int) -> dict:
    """One offline tuning run: baseline, 8 one-control changes of it (tune's screening), then the
    sampler; a trial marked ``skip_compile`` takes the values of ``predicted_from`` uncompiled."""
    names = [c["name"] for c in land["controls"]]
    values = [c["values"] for c in land["controls"]]
    configs = land["configs"]
    study = optuna.create_study(sampler=_sampler(variant, seed))
    study.enqueue_trial({n: None for n in names})
    screening = [(j, v) for j in range(len(names)) for v in values[j][1:]][:: max(1, len(names) * 3 // 8)][:8]
    for j, v in screening:
        study.enqueue_trial({n: (v if k == j else None) for k, n in enumerate(names)})
    curve: list[dict] = []
    wrong = 0
    for _ in range(budget):
        trial = study.ask()
        idx = ",".join(
            str(values[j].index(trial.suggest_categorical(n, values[j]))) for j, n in enumerate(names)
        )
        rec = configs[idx]
        attrs = trial.user_attrs
        if attrs.get("skip_compile"):
            source = study.trials[attrs["predicted_from"]]
            trial.set_user_attr("skipped_compile", True)
            wrong += not rec["ok"] or rec["hash"] != attrs["predicted_binary"]
            study.tell(trial, source.value)
            curve.append({"compiled": False, "value": None})
            continue
        if not rec["ok"]:
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
            curve.append({"compiled": True, "value": None})
            continue
        trial.set_user_attr("binary_hash", rec["hash"])
        if "predicted_binary" in attrs:
            trial.set_user_attr("prediction_ok", attrs["predicted_binary"] == rec["hash"])
        study.tell(trial, objective_value(land["kernel"], rec))
        curve.append({"compiled": True, "value": objective_value(land["kernel"], rec), "hash": rec["hash"]})
    return {"kernel": land["kernel"], "variant": variant, "seed": seed, "curve": curve, "wrong": wrong}


def _best_at(run: dict, budget: int) -> float:
    vals = [c["value"] for c in run["curve"][:budget] if c["compiled"] and c["value"] is not None]
    return min(vals) if vals else float("inf")


def _compiles_to(run: dict, budget: int, target: float) -> float:
    """Compiles among the first ``budget`` trials until a compiled one reached ``target``."""
    compiles = 0
    for c in run["curve"][:budget]:
        compiles += c["compiled"]
        if c["compiled"] and c["value"] is not None and c["value"] <= target:
            return compiles
    return float("inf")


def summarize(land: dict, runs: list[dict], reference: list[dict]) -> dict:
    """Best at each budget (median over seeds), share of seeds at the optimum, compiles skipped,
    compiles needed to reach the optimum and to reach the best of the ``reference`` (unaware)
    run of the same seed at the same budget, distinct binaries, wrong predictions."""
    optimum = min(objective_value(land["kernel"], r) for r in land["configs"].values() if r["ok"])
    out: dict[str, Any] = {"optimum": optimum, "seeds": len(runs)}
    for b in BUDGETS:
        pairs = list(zip(runs, reference, strict=True))
        out[f"to_ref_{b}"] = statistics.median(_compiles_to(r, b, _best_at(u, b)) for r, u in pairs)
        out[f"same_{b}"] = sum(_best_at(r, b) <= _best_at(u, b) for r, u in pairs)
    for b in BUDGETS:
        bests, skipped, distinct = [], [], []
        for r in runs:
            part = r["curve"][:b]
            vals = [c["value"] for c in part if c["compiled"] and c["value"] is not None]
            bests.append(min(vals) if vals else float("inf"))
            skipped.append(sum(not c["compiled"] for c in part) / len(part))
            distinct.append(len({c.get("hash") for c in part if c.get("hash")}))
        out[b] = {
            "best_median": statistics.median(bests),
            "best_mean": statistics.fmean(bests),
            "at_optimum": sum(x == optimum for x in bests) / len(bests),
            "skipped": statistics.fmean(skipped),
            "distinct": statistics.fmean(distinct),
        }
    to_opt = []
    for r in runs:
        compiles = 0
        hit = None
        for c in r["curve"]:
            compiles += c["compiled"]
            if c["compiled"] and c["value"] == optimum:
                hit = compiles
                break
        to_opt.append(hit)
    reached = sorted(x for x in to_opt if x is not None)
    out["reached"] = len(reached)
    out["compiles_to_optimum_median"] = statistics.median(
        [x if x is not None else float("inf") for x in to_opt]
    )
    out["wrong"] = sum(r["wrong"] for r in runs)
    return out


def cmd_replay(args: argparse.Namespace) -> None:
    rows = []
    for kernel in args.kernels.split(","):
        land = load_landscape(kernel)
        ok = [r for r in land["configs"].values() if r["ok"]]
        print(
            f"{kernel}: {len(land['configs'])} configurations, {len(ok)} compiled, "
            f"{len({r['hash'] for r in ok})} distinct binaries, objective {OBJECTIVE[kernel]}",
            file=sys.stderr,
            flush=True,
        )
        variants = args.variants.split(",")
        runs = {}
        for variant in ["unaware", *[v for v in variants if v != "unaware"]]:
            seeds = range(args.seed0, args.seed0 + args.seeds)
            runs[variant] = [replay_one(land, variant, seed, max(BUDGETS)) for seed in seeds]
            print(f"  {variant}: done", file=sys.stderr, flush=True)
        for variant in variants:
            rows.append((kernel, variant, summarize(land, runs[variant], runs["unaware"])))
    b1, b2, b3 = BUDGETS
    print(
        f"| kernel (objective; optimum) | variant | seeds | best at {b1} / {b2} / {b3} trials (median) "
        f"| seeds at the optimum at {b1} / {b2} / {b3} | compiles skipped at {b1} / {b2} / {b3} "
        f"| distinct binaries at {b3} | compiles to the optimum (median; seeds reaching it) "
        f"| same best as unaware at {b2} / {b3} | compiles to reach the unaware best at {b2} / {b3} (median) "
        "| wrong predictions |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for kernel, variant, s in rows:
        best = " / ".join(f"{s[b]['best_median']:g}" for b in BUDGETS)
        at = " / ".join(f"{s[b]['at_optimum']:.2f}" for b in BUDGETS)
        sk = " / ".join(f"{100 * s[b]['skipped']:.1f}%" for b in BUDGETS)
        print(
            f"| {kernel} ({OBJECTIVE[kernel]}; {s['optimum']:g}) | {variant} | {s['seeds']} | {best} | {at} | {sk} "
            f"| {s[b3]['distinct']:.1f} | {s['compiles_to_optimum_median']:g}; {s['reached']}/{s['seeds']} "
            f"| {s[f'same_{b2}']}/{s['seeds']} / {s[f'same_{b3}']}/{s['seeds']} "
            f"| {s[f'to_ref_{b2}']:g} / {s[f'to_ref_{b3}']:g} | {s['wrong']} |"
        )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("enumerate", help="compile every configuration once, cache the landscape")
    e.add_argument("--kernels", default=",".join(KERNELS))
    e.add_argument("--jobs", type=int, default=2)
    r = sub.add_parser("replay", help="offline tuning replays on the cached landscapes")
    r.add_argument("--kernels", default=",".join(KERNELS))
    r.add_argument("--variants", default=",".join(VARIANTS))
    r.add_argument("--seeds", type=int, default=20)
    r.add_argument("--seed0", type=int, default=0, help="the first seed (seeds seed0 .. seed0 + seeds - 1)")
    args = ap.parse_args(argv)
    if getattr(args, "jobs", 1) > 2:
        sys.exit("error: at most 2 parallel jobs on this shared machine")
    {"enumerate": cmd_enumerate, "replay": cmd_replay}[args.cmd](args)


if __name__ == "__main__":
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    main()
