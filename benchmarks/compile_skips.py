"""Compile skips of full-space flag-only tunes: a base source tree against this one, side by side.

    python benchmarks/compile_skips.py run --base /tmp/base --cases 1,3,5 --trials 64,128 \\
        --seeds 100:120 --compile-cache /tmp/ptxas-cache --out /tmp/skips.jsonl
    python benchmarks/compile_skips.py table /tmp/skips.jsonl
    python benchmarks/compile_skips.py same /tmp/skips.jsonl

``run`` tunes each case of ``tune_examples.CASES`` (single objective) with the real ptxas, per
budget and seed three times in a row, each in its own process: the binary-aware sampler of the
base tree (``--base``, put first on ``PYTHONPATH``), the binary-aware sampler of this tree, and the
unaware sampler (``binary_attr=None``) of this tree; one JSON line per tune.  A tune that fails is
reported on stderr with its own stderr (the traceback) and left out; the others go on.  ``table`` prints,
per case and budget, the medians over seeds: share of trials not compiled, compiles run, distinct
binaries, configurations run twice, best value, runs as good as the unaware run of the same seed,
and compiles until the unaware best was reached.  ``same`` says per seed whether the base and new
tunes gave the same results (for changes meant to leave the proposals as they are).

Ground truth: after each tune every skipped trial is compiled with its recorded flags (through
``--compile-cache`` when given; ptxas is deterministic) and its code hash compared with the
predicted one; "wrong skips" counts the skipped trials whose real binary differs (or fails), and
in brackets those of them whose real objective values differ from the reused ones.
``--new-knob NAME=VALUE`` (repeatable) sets ``ciq_optuna.samplers._genetic.NAME`` in the "new"
tunes only (a candidate behind a knob measured against the base); ``--base-knob`` likewise in the
"base" tunes only (a base that is itself a set of knobs on).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
VARIANTS = ("base", "new", "unaware")


def set_knobs(knobs: list[str]) -> None:
    """Set ``NAME=VALUE`` knobs (VALUE in JSON) on ``ciq_optuna.samplers._genetic``, each cast to
    the type of its default (a list gives a tuple knob)."""
    from ciq_optuna.samplers import _genetic

    for knob in knobs:
        name, value = knob.split("=", 1)
        if not hasattr(_genetic, name):
            raise SystemExit(f"no knob {name} in {_genetic.__file__}")
        setattr(_genetic, name, type(getattr(_genetic, name))(json.loads(value)))


def one(case: int, budget: int, seed: int, unaware: bool, cache: str | None, knobs: list[str] | None = None) -> dict[str, Any]:
    """One tune; its work-saved statistics, best value, the compile count to each best and the
    ground truth of its skips."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import tune_examples as te

    import ciq_optuna.tune as tune_module
    from ciq_optuna.samplers import GeneticSampler

    if cache:
        te._cache_compiles(Path(cache))
    set_knobs(knobs or [])
    if unaware:
        tune_module.make_sampler = lambda n, **kw: GeneticSampler(binary_attr=None, **kw)
    kernel, arch, metrics = te.CASES[case]
    res, wall = te._timed_tune(kernel, arch, metrics, argparse.Namespace(trials=budget, seed=seed))
    trials = sorted(res.study.get_trials(deepcopy=False), key=lambda t: t.number)
    configs = [tuple(sorted(t.params.items())) for t in trials]
    skipped = [t for t in trials if t.user_attrs.get("skipped_compile")]
    progress = []  # (compiles so far, value) at each compiled trial
    for t in trials:
        if "flags" in t.user_attrs and not t.user_attrs.get("skipped_compile") and t.values is not None:
            progress.append((len(progress) + 1, t.values[0]))
    kernel_path = ROOT / "examples" / kernel / f"{kernel}.{arch}.ptx"
    wrong, wrong_values = wrong_skips(skipped, kernel_path, arch, metrics)
    return {
        **res.stats["work_saved"],
        "skips_audited": len(skipped),
        "wrong_skips": len(wrong),
        "wrong_skip_trials": wrong,
        "wrong_values": len(wrong_values),
        "checks_kinds": _check_kinds(trials),
        "best": res.best[0].values[0],
        "twice": len(configs) - len(set(configs)),
        "repeats_skipped": sum("repeat_of" in t.user_attrs for t in skipped),
        "skips_recorded": all("predicted_from" in t.user_attrs for t in skipped),
        "progress": progress,
        "wall": wall,
    }


def wrong_skips(skipped: list[Any], kernel: Path, arch: str, metrics: list[str]) -> tuple[list[int], list[int]]:
    """Numbers of the skipped trials whose configuration, compiled now with the flags the trial
    recorded, does not give the predicted binary; and of those, the ones whose real objective
    values differ from the values the skip reused (a failed compile counts in both).  The compile
    is the tune's own (same compiler, arguments and timeout), so a compile cache replays it."""
    import tempfile

    from ciq_optuna.compilers import get_compiler
    from ciq_optuna.objectives.metrics import compile_metrics

    ptxas = get_compiler("ptxas")
    timeout = 120.0  # TuneConfig.timeout's default: the same arguments, the same cache entry
    wrong, wrong_values = [], []
    for t in skipped:
        with tempfile.TemporaryDirectory() as tmp:
            res = ptxas.compile(kernel, arch, t.user_attrs["flags"], output=Path(tmp) / "out.cubin", timeout=timeout)
            real = [compile_metrics(res).get(m) for m in metrics] if res.ok else None
        if not res.ok or res.code_hash != t.user_attrs["predicted_binary"]:
            wrong.append(t.number)
            if real is None or [float(v) if v is not None else None for v in real] != list(t.values):
                wrong_values.append(t.number)
    return wrong, wrong_values


def _check_kinds(trials: list[Any]) -> dict[str, list[int]]:
    """Checks (compiled predicted trials) and wrong ones, per kind where the trials record it
    (``predicted_doubt``): {"plain": [checks, wrong], "doubtful": [...], "unknown": [...]}."""
    out = {"plain": [0, 0], "doubtful": [0, 0], "unknown": [0, 0]}
    for t in trials:
        a = t.user_attrs
        if "predicted_binary" not in a or a.get("skipped_compile") or "repeat_of" in a:
            continue
        kind = "unknown" if "predicted_doubt" not in a else ("doubtful" if a["predicted_doubt"] else "plain")
        out[kind][0] += 1
        out[kind][1] += a.get("binary_hash") != a["predicted_binary"]
    return out


def run(args: argparse.Namespace) -> None:
    lo, hi = (int(s) for s in args.seeds.split(":"))
    with open(args.out, "a") as out:
        for case in (int(c) for c in args.cases.split(",")):
            for budget in (int(b) for b in args.trials.split(",")):
                for seed in range(lo, hi):
                    for variant in args.variants.split(","):
                        tree = args.base if variant == "base" else str(ROOT)
                        env = {**os.environ, "PYTHONPATH": tree}
                        cmd = [sys.executable, __file__, "one", str(case), str(budget), str(seed), variant]
                        cmd += ["--compile-cache", args.compile_cache] if args.compile_cache else []
                        if variant == "new":
                            cmd += [f"--knob={k}" for k in args.new_knob]
                        elif variant == "base":
                            cmd += [f"--knob={k}" for k in args.base_knob]
                        got = subprocess.run(cmd, env=env, capture_output=True, text=True)
                        if got.returncode:  # say why, keep going: the other tunes still count
                            print(f"case {case}, {budget} trials, seed {seed}, {variant}: failed", file=sys.stderr)
                            print(got.stderr, file=sys.stderr, flush=True)
                            continue
                        row = json.loads(got.stdout.strip().splitlines()[-1])
                        row.update(case=case, budget=budget, seed=seed, variant=variant)
                        out.write(json.dumps(row) + "\n")
                        out.flush()


def _rows(path: str) -> list[dict[str, Any]]:
    """The runs recorded in ``path`` (JSON lines, gzip-compressed if it ends in ``.gz``); a
    missing file or a line that is not JSON stops with one line saying which."""
    try:
        text = gzip.open(path, "rt").read() if path.endswith(".gz") else Path(path).read_text()
    except OSError as exc:
        raise SystemExit(f"error: cannot read {path}: {exc.strerror or exc}") from None
    rows = []
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise SystemExit(f"error: {path}, line {n}: not JSON ({exc.msg})") from None
    return rows


def table(path: str) -> None:
    rows = _rows(path)
    ran = [v for v in VARIANTS if any(r["variant"] == v for r in rows)]
    if "unaware" not in ran:
        raise SystemExit(f"error: {path}: the runs need the unaware variant (each run is compared with it)")
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from tune_examples import CASES

    med = statistics.median
    print(
        "| kernel | arch | trials | sampler | seeds | not compiled (median share) | compiles run | distinct binaries "
        "| configurations run twice | exact repeats skipped | checks (wrong), sum | skips / wrong skips (other values), sum "
        "| best (median) | as good as unaware | compiles to the unaware best (median) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    keys = sorted({(r["case"], r["budget"]) for r in rows})
    for case, budget in keys:
        runs = {v: {r["seed"]: r for r in rows if (r["case"], r["budget"], r["variant"]) == (case, budget, v)} for v in ran}
        seeds = sorted(set.intersection(*(set(runs[v]) for v in ran)))
        kernel, arch, _ = CASES[case]
        for v in ran:
            rs = [runs[v][s] for s in seeds]
            targets = [runs["unaware"][s]["best"] for s in seeds]
            same = sum(r["best"] <= t for r, t in zip(rs, targets, strict=True))
            to = [next((c for c, val in r["progress"] if val <= t), float("inf")) for r, t in zip(rs, targets, strict=True)]
            print(
                f"| {kernel} | {arch} | {budget} | {v} | {len(rs)} "
                f"| {100 * med(r['compiles_skipped'] / r['trials'] for r in rs):.0f}% "
                f"| {med(r['compiles_run'] for r in rs):g} | {med(r['distinct_binaries'] for r in rs):g} "
                f"| {med(r['twice'] for r in rs):g} | {_repeats(rs)} | {_checks(rs)} | {_wrong(rs)} "
                f"| {med(r['best'] for r in rs):g} | {same}/{len(rs)} "
                f"| {med(to):g} |"
            )
    if ran == list(VARIANTS):
        pooled(rows)


def _repeats(rows: list[dict[str, Any]]) -> str:
    """Median exact repeats skipped (``repeat_of``), "-" where the rows do not say."""
    got = [r["repeats_skipped"] for r in rows if "repeats_skipped" in r]
    return f"{statistics.median(got):g}" if len(got) == len(rows) and rows else "-"


def _checks(rows: list[dict[str, Any]]) -> str:
    """Checks (predicted trials compiled) and of them wrong, summed over the rows."""
    return f"{sum(r.get('predictions_checked', 0) for r in rows)} ({sum(r.get('predictions_wrong', 0) for r in rows)})"


def _wrong(rows: list[dict[str, Any]]) -> str:
    """Skipped trials and of them wrong (ground truth), summed; "-" where the rows do not say."""
    if not rows or any("wrong_skips" not in r for r in rows):
        return "-"
    got = (sum(r[k] for r in rows) for k in ("skips_audited", "wrong_skips", "wrong_values"))
    return "{} / {} ({})".format(*got)


def pooled(rows: list[dict[str, Any]]) -> None:
    """Per budget over every case and seed that all three variants ran: runs as good as the
    unaware run, runs where the new sampler's best is better / worse than the base's, and the
    median share not compiled per variant, and the median share skipped rightly."""
    print()
    print(
        "| trials | runs | as good as unaware: base / new | new better / worse than base "
        "| not compiled (median share): base / new | compiles run (sum): base / new "
        "| skips / wrong skips (other values), sum: base ; new | right skips (median share): base / new |"
    )
    print("|---:|---:|---|---|---|---|---|---|")
    for budget in sorted({r["budget"] for r in rows}):
        got = {(r["case"], r["seed"], r["variant"]): r for r in rows if r["budget"] == budget}
        runs = sorted({(c, s) for c, s, _ in got if all((c, s, v) in got for v in VARIANTS)})
        base, new, unaware = ([got[(c, s, v)] for c, s in runs] for v in VARIANTS)
        good = [sum(r["best"] <= u["best"] for r, u in zip(rs, unaware, strict=True)) for rs in (base, new)]
        better = sum(n["best"] < b["best"] for n, b in zip(new, base, strict=True))
        worse = sum(n["best"] > b["best"] for n, b in zip(new, base, strict=True))
        share = [100 * statistics.median(r["compiles_skipped"] / r["trials"] for r in rs) for rs in (base, new)]
        runs_c = [sum(r["compiles_run"] for r in rs) for rs in (base, new)]
        print(
            f"| {budget} | {len(runs)} | {good[0]}/{len(runs)} / {good[1]}/{len(runs)} | {better} / {worse} "
            f"| {share[0]:.1f} % / {share[1]:.1f} % | {runs_c[0]} / {runs_c[1]} | {_wrong(base)} ; {_wrong(new)} "
            f"| {_right_share(base)} / {_right_share(new)} |"
        )


def _right_share(rows: list[dict[str, Any]]) -> str:
    """Median over the rows of the share of trials skipped rightly ((skipped - wrong skips) /
    trials), to two decimals; "-" where the rows do not say."""
    if not rows or any("wrong_skips" not in r for r in rows):
        return "-"
    return f"{100 * statistics.median((r['compiles_skipped'] - r['wrong_skips']) / r['trials'] for r in rows):.2f} %"


def same(path: str) -> None:
    """Per case, budget and seed: whether the base and new tunes gave the same results (every
    field but the wall time: the compile counts, best value, progress to each best)."""
    runs: dict[tuple[int, int, int], dict[str, dict[str, Any]]] = {}
    for r in _rows(path):
        runs.setdefault((r["case"], r["budget"], r["seed"]), {})[r["variant"]] = {
            k: v for k, v in r.items() if k not in ("wall", "variant")
        }
    differ = 0
    for (case, budget, seed), by in sorted(runs.items()):
        if "base" in by and "new" in by:
            ok = by["base"] == by["new"]
            differ += not ok
            print(f"case {case}, {budget} trials, seed {seed}: {'identical' if ok else 'DIFFERENT'}")
    print("all identical" if not differ else f"{differ} different")


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--base", required=True, help="source tree of the base commit")
    r.add_argument("--cases", default="1,3,5")
    r.add_argument("--trials", default="64,128")
    r.add_argument("--seeds", default="100:120", help="first:last+1")
    r.add_argument("--compile-cache", default=None)
    r.add_argument("--variants", default=",".join(VARIANTS), help="of base,new,unaware")
    r.add_argument("--out", required=True)
    r.add_argument("--new-knob", action="append", default=[], help="NAME=VALUE of _genetic, new tunes only")
    r.add_argument("--base-knob", action="append", default=[], help="NAME=VALUE of _genetic, base tunes only")
    o = sub.add_parser("one")
    o.add_argument("case", type=int)
    o.add_argument("budget", type=int)
    o.add_argument("seed", type=int)
    o.add_argument("variant", choices=VARIANTS)
    o.add_argument("--compile-cache", default=None)
    o.add_argument("--knob", action="append", default=[])
    t = sub.add_parser("table")
    t.add_argument("path")
    s = sub.add_parser("same", help="whether base and new gave the same results, per seed")
    s.add_argument("path")
    args = parser.parse_args()
    if args.cmd == "run":
        run(args)
    elif args.cmd == "one":
        print(json.dumps(one(args.case, args.budget, args.seed, args.variant == "unaware", args.compile_cache, args.knob)))
    elif args.cmd == "same":
        same(args.path)
    else:
        table(args.path)


if __name__ == "__main__":
    main()
