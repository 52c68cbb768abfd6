"""Missed compile skips: compiled trials whose binary an earlier trial had already produced, and why
the binary model did not predict them.

    python benchmarks/skip_coverage.py --case 3 --trials 128 --seeds 300:304 --compile-cache /tmp/ptxas-cache \\
        --knob _PREDICT_COMPLETED=true --out /tmp/coverage.jsonl
    python benchmarks/skip_coverage.py --table /tmp/coverage.jsonl

Tunes ``tune_examples.CASES[case]`` with the real ptxas (binary-aware GeneticSampler of this tree)
and keeps, when each trial is planned, the model's view of the configuration it will run: the
planned and the announced prediction, whether the row leaves a gene open, the canonical settings
of every compiled trial so far.  After the tune, each compiled trial whose binary equals an
earlier compiled trial's binary (a missed skip) gets one category:

- ``required``: a trial queued to be compiled whatever is predicted (the screening of single
  flags at the start of a tune, the winner's simplification attempts);
- ``checked``: predicted, and compiled as a check;
- ``completion``: the plan was predicted, the completion of its open genes was not;
- ``open``: the row leaves open a gene whose values do not fall in one class;
- ``conflict``: its canonical settings match trials of several binaries;
- otherwise, against the earlier trial of that binary with the fewest genes whose canonical
  settings differ (ties: the fewest genes that differ at all), the genes left (``uncovered``):
  ``one:<kind>`` for one gene, ``many:<kinds>`` for two or more, where a gene's kind is
  ``never`` (no inert change of it seen, and none that mattered), ``mattered`` (only changes
  that mattered), ``pair`` (this very value change was seen inert, with other genes elsewhere:
  the context blocked it), ``values`` (both values seen in inert changes, not this pair) or
  ``new-value`` (a value never seen in an inert change, the gene's absence included).

``--table`` counts the categories per kernel.  Each gene of kind ``pair`` also records the
genes whose setting blocked it (the switches of its value classes, or the context of its
inertness as a whole).  Two more counts, summed over the tunes:

- relaxed rules, over the compiled trials that had no prediction (queued ones left out): the
  binary a looser rule would have predicted, right / wrong / conflicting; ``clean``: every gene
  whose canonical setting differs from an earlier trial's has inert changes and none that
  mattered nor a failed check (a value never seen inert is then taken as inert too);
  ``clean1``: the same with one such gene; ``clean_u``: ``clean`` for unordered genes only;
- the predictions per doubt (``BinaryModel.predict``): skipped, of them wrong (each skipped trial
  compiled after the tune, as ``compile_skips.py``), compiled as checks, of them wrong.
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def snapshot(sampler: Any, plan: dict[str, Any]) -> dict[str, Any] | None:
    """The model's view now of ``plan`` (the configuration the trial will run)."""
    model = sampler._binaries
    if not model.active:
        return None
    model._refresh()
    row = model._present(model._fill(sampler._encode(plan)[None, :]))
    blind = False
    if model.domains is not None:
        gaps = model.open_genes(row)
        if gaps.any():
            blind = bool(model._one_class(row.copy(), gaps)[0])
    row = row[0]
    mine = model._canonical(row[None, :])[0]
    group = model._groups.get(tuple(mine.tolist()))
    n = len(model._keys)
    genes = {}
    for j in range(len(row)):
        gene, rule = model._genes.get(j), model._rules.get(j)
        blockers: list[int] = []
        if rule is not None:
            blockers = list(rule.switches)
            if rule.whole is not None and rule.whole[0] >= 0:
                blockers.append(int(rule.whole[0]))
        genes[j] = {
            "same": bool(model._same.get(j)),
            "diff": bool(model._diff.get(j)),
            "pairs": sorted(gene.same_pairs) if gene else [],
            "seen": sorted(gene.seen) if gene else [],
            "blockers": blockers,
            "failed": int(model._failed.get(j, 0)),
            "ordered": model._is_ordered(j),
        }
    d = len(row)
    clean = np.array([genes[j]["same"] and not genes[j]["diff"] and not genes[j]["failed"] for j in range(d)])
    unordered = np.array([not genes[j]["ordered"] for j in range(d)])
    apart = model._canon_rows[:n] != mine
    relaxed = {}
    for name, ok, single in (("clean", clean, False), ("clean1", clean, True), ("clean_u", clean & unordered, False)):
        fits = apart.any(axis=1) & ~(apart & ~ok).any(axis=1)
        if single:
            fits &= apart.sum(axis=1) == 1
        hs = {model._hash_names[model._hash[k]] for k in np.flatnonzero(fits).tolist()}
        relaxed[name] = hs.pop() if len(hs) == 1 else (None if not hs else "conflict")
        if single and relaxed[name] not in (None, "conflict"):
            k = int(np.flatnonzero(fits)[0])
            j = int(np.flatnonzero(apart[k])[0])
            info = genes[j]
            seen = [x for x in info["seen"] if x >= 0]
            relaxed["clean1_detail"] = [j, len(info["pairs"]), float(model._rows[k, j]), float(row[j]),
                                        bool(seen and min(seen) <= row[j] <= max(seen)), len(seen), info["pairs"]]
    return {
        "relaxed": relaxed,
        "row": row.copy(),
        "mine": mine.copy(),
        "rows": model._rows[:n].copy(),
        "canon": model._canon_rows[:n].copy(),
        "hashes": [model._hash_names[h] for h in model._hash[:n]],
        "numbers": list(model._number[:n]),
        "blind": blind,
        "conflict": group is not None and len(group.hashes) > 1,
        "genes": genes,
    }


def kind(info: dict[str, Any], a: float, v: float) -> str:
    """How gene evidence covers the value change a -> v (see the module's docstring)."""
    if not info["same"]:
        return "mattered" if info["diff"] else "never"
    if [min(a, v), max(a, v)] in [list(p) for p in info["pairs"]]:
        return "pair"
    if a in info["seen"] and v in info["seen"]:
        return "values"
    return "new-value"


def classify(t: Any, snap: dict[str, Any] | None, planned: Any, names: list[str]) -> dict[str, Any] | None:
    """The category of compiled trial ``t`` if its binary repeats an earlier compiled one."""
    if snap is None:
        return None
    binary = t.user_attrs.get("binary_hash")
    same = [k for k, h in enumerate(snap["hashes"]) if h == binary]
    if not same:
        return None
    out: dict[str, Any] = {"trial": t.number}
    if t.user_attrs.get("compile_required"):
        return {**out, "category": "required"}
    if "predicted_binary" in t.user_attrs:
        right = t.user_attrs["predicted_binary"] == binary
        return {**out, "category": "checked" if right else "checked-wrong", "doubt": snap.get("doubt")}
    best = min(
        same,
        key=lambda k: (int((snap["canon"][k] != snap["mine"]).sum()), int((snap["rows"][k] != snap["row"]).sum())),
    )
    src, row = snap["rows"][best], snap["row"]
    unc = np.flatnonzero(snap["canon"][best] != snap["mine"]).tolist()
    genes = []
    for j in unc:
        info = snap["genes"][j]
        genes.append(
            {
                "gene": names[j],
                "from": float(src[j]),
                "to": float(row[j]),
                "kind": kind(info, float(src[j]), float(row[j])),
                "blockers": [names[q] for q in info["blockers"]],
                "n_pairs": len(info["pairs"]),
                "diff": info["diff"],
                "ordered": info["ordered"],
                "failed": info["failed"],
            }
        )
    out.update(source=snap["numbers"][best], raw_apart=int((src != row).sum()), genes=genes)
    if planned is not None:
        category = "completion"
    elif snap["blind"]:
        category = "open"
    elif snap["conflict"]:
        category = "conflict"
    elif not unc:
        category = "other"
    elif len(unc) == 1:
        category = "one:" + genes[0]["kind"]
    else:
        category = "many:" + "+".join(sorted({g["kind"] for g in genes}))
    return {**out, "category": category}


def one(case: int, budget: int, seed: int, cache: str | None, knobs: list[str]) -> dict[str, Any]:
    """One tune: per missed skip its category; and the trial counts."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import compile_skips as cs
    import tune_examples as te

    from ciq_optuna.samplers import GeneticSampler
    from ciq_optuna.samplers._genetic import trial_id_of

    cs.set_knobs(knobs)
    if cache:
        te._cache_compiles(Path(cache))
    snaps: dict[int, tuple[dict[str, Any] | None, Any]] = {}
    last: dict[str, Any] = {}
    doubts: dict[int, int] = {}
    plan_of, before_of, announce_of = GeneticSampler._plan, GeneticSampler.before_trial, GeneticSampler._announce
    holder: dict[str, Any] = {}

    def planning(self: Any, *args: Any, **kwargs: Any) -> Any:
        got = plan_of(self, *args, **kwargs)
        last["prediction"] = got[1]
        return got

    def announce(self: Any, study: Any, trial: Any, prediction: Any) -> None:
        last["doubt"] = prediction[2]
        doubts[trial.number] = prediction[2]
        announce_of(self, study, trial, prediction)

    def before(self: Any, study: Any, trial: Any) -> None:
        last.clear()
        before_of(self, study, trial)
        holder["sampler"] = self
        plan = self._plans.get(trial_id_of(trial))
        if isinstance(plan, dict):
            snap = snapshot(self, plan)
            if snap is not None:
                snap["doubt"] = last.get("doubt")
            snaps[trial.number] = (snap, last.get("prediction"))

    GeneticSampler._plan, GeneticSampler.before_trial, GeneticSampler._announce = planning, before, announce
    kernel, arch, metrics = te.CASES[case]
    res, _ = te._timed_tune(kernel, arch, metrics, argparse.Namespace(trials=budget, seed=seed))
    names = holder["sampler"]._names
    trials = sorted(res.study.get_trials(deepcopy=False), key=lambda t: t.number)
    missed = []
    compiled = [t for t in trials if "binary_hash" in t.user_attrs and not t.user_attrs.get("skipped_compile")]
    for t in compiled:
        snap, planned = snaps.get(t.number, (None, None))
        got = classify(t, snap, planned, names)
        if got is not None:
            missed.append(got)
    skipped = sum(bool(t.user_attrs.get("skipped_compile")) for t in trials)
    skips = [t for t in trials if t.user_attrs.get("skipped_compile") and "repeat_of" not in t.user_attrs]
    wrong, _ = cs.wrong_skips(skips, ROOT / "examples" / kernel / f"{kernel}.{arch}.ptx", arch, metrics)
    by_doubt: dict[str, list[int]] = {}  # doubt -> [skipped, skipped wrong, checked, checked wrong]
    for t in trials:
        if t.number not in doubts or "predicted_binary" not in t.user_attrs or "repeat_of" in t.user_attrs:
            continue
        got = by_doubt.setdefault(str(doubts[t.number]), [0, 0, 0, 0])
        if t.user_attrs.get("skipped_compile"):
            got[0] += 1
            got[1] += t.number in wrong
        else:
            got[2] += 1
            got[3] += t.user_attrs.get("binary_hash") != t.user_attrs["predicted_binary"]
    detail: list[Any] = []
    relaxed: dict[str, list[int]] = {}  # per relaxed rule: [right, wrong, conflict] over unpredicted compiles
    for t in compiled:
        snap = snaps.get(t.number, (None, None))[0]
        if snap is None or "predicted_binary" in t.user_attrs or t.user_attrs.get("compile_required"):
            continue
        if "clean1_detail" in snap["relaxed"]:
            detail.append([*snap["relaxed"]["clean1_detail"], names[snap["relaxed"]["clean1_detail"][0]],
                           snap["relaxed"]["clean1"] == t.user_attrs["binary_hash"]])
        for name, h in snap["relaxed"].items():
            if name.endswith("_detail"):
                continue
            got = relaxed.setdefault(name, [0, 0, 0])
            if h == "conflict":
                got[2] += 1
            elif h is not None:
                got[h != t.user_attrs["binary_hash"]] += 1
    return {
        "case": case,
        "kernel": kernel,
        "budget": budget,
        "seed": seed,
        "trials": len(trials),
        "compiled": len(compiled),
        "skipped": skipped,
        "missed": missed,
        "relaxed": relaxed,
        "clean1_detail": detail,
        "by_doubt": by_doubt,
        "best": res.best[0].values[0],
    }


def table(paths: list[str]) -> None:
    rows = []
    for path in paths:
        text = gzip.open(path, "rt").read() if path.endswith(".gz") else Path(path).read_text()
        rows += [json.loads(line) for line in text.splitlines() if line.strip()]
    kernels = sorted({r["kernel"] for r in rows})
    counts: dict[str, collections.Counter[str]] = {k: collections.Counter() for k in kernels}
    blockers: collections.Counter[str] = collections.Counter()
    doubts: collections.Counter[Any] = collections.Counter()
    for r in rows:
        for m in r["missed"]:
            counts[r["kernel"]][m["category"]] += 1
            if m["category"] == "checked":
                doubts[m.get("doubt")] += 1
            for g in m.get("genes", []):
                if g["kind"] == "pair":
                    blockers[f"{g['gene']} by {','.join(g['blockers']) or '-'}"] += 1
    print("| kernel | tunes | trials | compiled | skipped | compiled repeats (missed skips) |")
    print("|---|---:|---:|---:|---:|---:|")
    for k in kernels:
        rs = [r for r in rows if r["kernel"] == k]
        print(
            f"| {k} | {len(rs)} | {sum(r['trials'] for r in rs)} | {sum(r['compiled'] for r in rs)} "
            f"| {sum(r['skipped'] for r in rs)} | {sum(len(r['missed']) for r in rs)} |"
        )
    print()
    cats = sorted({c for cnt in counts.values() for c in cnt}, key=lambda c: -sum(cnt[c] for cnt in counts.values()))
    print("| category | " + " | ".join(kernels) + " | all |")
    print("|---|" + "---:|" * (len(kernels) + 1))
    for c in cats:
        per = [counts[k][c] for k in kernels]
        print(f"| {c} | " + " | ".join(map(str, per)) + f" | {sum(per)} |")
    print()
    rel: dict[str, list[int]] = {}
    for r in rows:
        for name, v in r.get("relaxed", {}).items():
            rel[name] = [a + b for a, b in zip(rel.get(name, [0, 0, 0]), v, strict=True)]
    print("relaxed rules over unpredicted compiles, right / wrong / conflict:", rel)
    bd: dict[str, list[int]] = {}
    for r in rows:
        for k, v in r.get("by_doubt", {}).items():
            bd[k] = [a + b for a, b in zip(bd.get(k, [0, 0, 0, 0]), v, strict=True)]
    print("predictions by doubt: skipped, skipped wrong, checked, checked wrong:", dict(sorted(bd.items())))
    print("checks by doubt:", dict(sorted(doubts.items(), key=lambda kv: str(kv[0]))))
    print("genes of kind pair, blocked by (the switches / whole-gene context):")
    for what, n in blockers.most_common(15):
        print(f"  {n:4d}  {what}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--case", type=int, default=3)
    parser.add_argument("--trials", type=int, default=128)
    parser.add_argument("--seeds", default="300:301", help="first:last+1")
    parser.add_argument("--compile-cache", default=None)
    parser.add_argument("--knob", action="append", default=[], help="NAME=VALUE of _genetic")
    parser.add_argument("--out", default=None, help="append one JSON line per tune")
    parser.add_argument("--table", nargs="+", default=None, help="count the categories of these files")
    args = parser.parse_args()
    if args.table:
        table(args.table)
        return
    lo, hi = (int(s) for s in args.seeds.split(":"))
    for seed in range(lo, hi):
        got = one(args.case, args.trials, seed, args.compile_cache, args.knob)
        line = json.dumps(got)
        if args.out:
            with open(args.out, "a") as f:
                f.write(line + "\n")
        print(f"case {args.case} seed {seed}: {got['compiled']} compiled, {got['skipped']} skipped, "
              f"{len(got['missed'])} missed", flush=True)


if __name__ == "__main__":
    main()
