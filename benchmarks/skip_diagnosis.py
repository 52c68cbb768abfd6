"""Why a compile skip was wrong: the genes it changed and the inference that judged them inert.

    python benchmarks/skip_diagnosis.py --case 2 --trials 128 --seeds 0:3 --compile-cache /tmp/ptxas-cache

Tunes ``tune_examples.CASES[case]`` with the real ptxas (binary-aware GeneticSampler of this tree)
and records, at the moment each prediction is announced, how ``BinaryModel`` made it: per gene
that differs between the candidate and the trial it was predicted from (``predicted_from``), the
mechanism that put both values in one class (``whole`` = inert as a whole, everywhere or where a
context gene takes some settings; ``pair`` = this very value change was seen inert; ``class`` =
the values were joined through other inert changes, or lie in an interval of an ordered gene),
whether the row's context was new to that gene (``untested``), and the inert pairs behind it.
After the tune every skipped trial is compiled (ground truth, as ``compile_skips.py``); each
wrong skip is printed with that record, then a count of mechanisms over right and wrong skips.
"""

from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def explain(sampler: Any, params: dict[str, Any]) -> dict[str, Any]:
    """How the sampler's binary model predicts ``params`` (its state now): the trial it predicts
    from, the doubt, and per changed gene (name, from, to, mechanism, untested, evidence)."""
    from ciq_optuna.samplers import _binaries as b

    model = sampler._binaries
    model._refresh()
    codes = sampler._encode(params)[None, :]
    row = model._present(model._fill(codes))[0]
    mine = model._canonical(row[None, :])[0]
    group = model._groups.get(tuple(mine.tolist()))
    if group is None or len(group.hashes) > 1:
        return {"source": None}
    k = model._by_number[model._number[group.first]]
    src = model._rows[k]
    ordered = model._ordered_list()
    genes = []
    for j in np.where(row != src)[0].tolist():
        rule, gene = model._rules.get(j), model._genes.get(j)
        a, v = float(src[j]), float(row[j])
        if rule is None:
            how = "none"
        elif rule.whole is not None and rule.column(row[None, :], j)[0] == b._ANY:
            q = rule.whole[0]
            how = "whole" if q < 0 else f"whole@{sampler._names[q]}"
        elif (min(a, v), max(a, v)) in gene.same_pairs:
            how = "pair"
        else:
            how = "class"
        pairs = [
            (model._number[i], model._number[o] if o >= 0 else -1, x, y)
            for x, y, i, o in model._same.get(j, [])
        ]
        genes.append(
            {
                "gene": sampler._names[j],
                "from": a,
                "to": v,
                "how": how,
                "seen": [v in gene.seen, a in gene.seen] if gene else [False, False],
                "untested": bool(model._untested(row, src, j, mine, ordered)),
                "mattered": sorted(gene.diff_pairs) if gene else [],
                "inert_pairs": pairs[:6],
                "n_inert": len(pairs),
            }
        )
    return {"source": model._number[k], "genes": genes}


def one(case: int, budget: int, seed: int, cache: str | None, knobs: list[str]) -> list[dict[str, Any]]:
    """One tune; per skipped trial: its explanation and whether the skip was wrong."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import compile_skips as cs
    import tune_examples as te

    from ciq_optuna.samplers import GeneticSampler

    cs.set_knobs(knobs)
    if cache:
        te._cache_compiles(Path(cache))
    notes: dict[int, dict[str, Any]] = {}
    announce = GeneticSampler._announce

    def recording(self: Any, study: Any, trial: Any, prediction: Any) -> None:
        from ciq_optuna.samplers._genetic import trial_id_of

        plan = self._plans.get(trial_id_of(trial))
        if isinstance(plan, dict):
            notes[trial.number] = {**explain(self, plan), "doubt": prediction[2]}
        announce(self, study, trial, prediction)

    GeneticSampler._announce = recording
    kernel, arch, metrics = te.CASES[case]
    res, _ = te._timed_tune(kernel, arch, metrics, argparse.Namespace(trials=budget, seed=seed))
    trials = sorted(res.study.get_trials(deepcopy=False), key=lambda t: t.number)
    skipped = [t for t in trials if t.user_attrs.get("skipped_compile") and "repeat_of" not in t.user_attrs]
    wrong, other = cs.wrong_skips(skipped, ROOT / "examples" / kernel / f"{kernel}.{arch}.ptx", arch, metrics)
    out = []
    for t in skipped:
        note = notes.get(t.number, {})
        out.append(
            {
                "trial": t.number,
                "from": t.user_attrs.get("predicted_from"),
                "wrong": t.number in wrong,
                "other_value": t.number in other,
                **note,
            }
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--case", type=int, default=2)
    parser.add_argument("--trials", type=int, default=128)
    parser.add_argument("--seeds", default="0:1", help="first:last+1")
    parser.add_argument("--compile-cache", default=None)
    parser.add_argument("--quiet", action="store_true", help="only the counts")
    parser.add_argument("--knob", action="append", default=[], help="NAME=VALUE of _genetic")
    args = parser.parse_args()
    lo, hi = (int(s) for s in args.seeds.split(":"))
    counts: collections.Counter[tuple[str, bool]] = collections.Counter()
    skips = wrong = other = 0
    for seed in range(lo, hi):
        for s in one(args.case, args.trials, seed, args.compile_cache, args.knob):
            skips, wrong, other = skips + 1, wrong + s["wrong"], other + s["other_value"]
            for g in s.get("genes", []):
                counts[(g["how"] + ("?" if g["untested"] else ""), s["wrong"])] += 1
            if s["wrong"] and not args.quiet:
                print(f"seed {seed} trial {s['trial']} from {s['from']} doubt {s.get('doubt')} other value {s['other_value']}")
                for g in s.get("genes", []):
                    print(f"    {g}")
    print(f"skips {skips}, wrong {wrong} (other value {other})")
    print("mechanism per changed gene: right skips / wrong skips")
    for how in sorted({h for h, _ in counts}):
        print(f"  {how:30s} {counts[(how, False)]:5d} / {counts[(how, True)]:5d}")


if __name__ == "__main__":
    main()
