"""Check that GeneticSampler proposes exactly what it proposed at another commit (for changes
meant to be pure performance work): the same scenarios run with this tree's package and with the
package at ``--against`` (extracted with ``git archive`` into a temporary folder), every trial's
state, parameters and user attributes compared one by one.

Scenarios: kernel_tuner replays (1,000 trials on gemm_RTX_3090, 400 on the three others, two
seeds each; ``--big``: 5,000 on gemm), two objectives (300 trials), conditional parameters with
failures and enqueued trials (370), binary-aware predictions (300), a SQLite study (150).

Usage: nice -n 10 python benchmarks/same_proposals.py --against 173bc19 [--big]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _cond_objective(trial):  # type: ignore[no-untyped-def]
    x = trial.suggest_int("x", 0, 30)
    mode = trial.suggest_categorical("mode", ["a", "b", "c"])
    if mode == "a":
        y = trial.suggest_float("y", 0.0, 1.0)
    elif mode == "b":
        y = trial.suggest_int("yb", 1, 1000, log=True) / 1000
    else:
        y = 0.5
    on = trial.suggest_categorical("u.passed", [False, True])
    u = trial.suggest_int("u", 1, 8) if on else 0
    s = trial.suggest_float("s", 0.5, 4.0, step=0.5)
    if x > 25 and u > 5:
        raise ValueError("a failing region")
    if x % 7 == 3:
        return float("nan")
    return (x - 11) ** 2 * 0.1 + y + abs(u - 3) + s


def _binary_objective(trial):  # type: ignore[no-untyped-def]
    p = {k: trial.suggest_int(k, 0, 5) for k in "abcdef"}
    flag = trial.suggest_categorical("flag", [False, True])
    if trial.user_attrs.get("skip_compile"):  # the hook a compile objective honours
        trial.set_user_attr("skipped_compile", True)
        return trial.study.trials[trial.user_attrs["predicted_from"]].value
    binary = hashlib.md5(f"{p['a']}{p['b'] // 2}{p['c'] if flag else 0}".encode()).hexdigest()
    trial.set_user_attr("binary_hash", binary)
    return (p["a"] - 3) ** 2 + (p["b"] // 2 - 1) ** 2 + (p["c"] if flag else 2) + 0.01 * p["d"]


def _replay(space, sampler, n: int, objectives: int = 1):  # type: ignore[no-untyped-def]
    import optuna
    from optuna.trial import TrialState

    study = optuna.create_study(directions=["minimize"] * objectives, sampler=sampler)
    for _ in range(n):
        trial = study.ask()
        cfg = tuple(trial.suggest_categorical(k, space.values[k]) for k in space.keys)
        rec = space.table.get(cfg)
        if rec is None:
            study.tell(trial, state=TrialState.FAIL)
        else:
            study.tell(trial, rec[0] if objectives == 1 else list(rec[:objectives]))
    return study


def run_scenarios(big: bool) -> dict[str, list]:
    """Every scenario's trials as [number, state, params, user attributes]."""
    import optuna

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import replay as R

    from ciq_optuna.samplers import GeneticSampler

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    warnings.simplefilter("ignore")

    def dump(study):  # type: ignore[no-untyped-def]
        return [[t.number, t.state.name, t.params, t.user_attrs] for t in study.trials]

    out: dict[str, list] = {}
    for ds, n in (("gemm_RTX_3090", 1000), ("convolution_A100", 400), ("convolution_MI250X", 400),
                  ("dedispersion_MI250X", 400)):
        for seed in (0, 1):
            out[f"replay/{ds}/{seed}"] = dump(_replay(R.load_space(ds), R.build_sampler("genetic", seed), n))
    if big:
        out["replay/gemm_RTX_3090/5000"] = dump(_replay(R.load_space("gemm_RTX_3090"), R.build_sampler("genetic", 3), 5000))
    for seed in (0, 1):
        space = R.load_space("convolution_A100")
        out[f"two objectives/{seed}"] = dump(_replay(space, R.build_sampler("genetic_mo", seed, 2), 300, 2))
    for seed in (0, 1, 2):
        study = optuna.create_study(sampler=GeneticSampler(seed=seed))
        study.enqueue_trial({"x": 11, "mode": "c", "u.passed": True, "u": 3, "s": 0.5})
        study.enqueue_trial({"x": 12})
        study.optimize(_cond_objective, n_trials=350, catch=(ValueError,))
        study.enqueue_trial({"x": 11, "mode": "c", "u.passed": True, "u": 3, "s": 0.5})  # seen before
        study.optimize(_cond_objective, n_trials=20, catch=(ValueError,))
        out[f"conditional/{seed}"] = dump(study)
        study = optuna.create_study(sampler=GeneticSampler(seed=seed))
        study.optimize(_binary_objective, n_trials=300)
        out[f"binary-aware/{seed}"] = dump(study)
    with tempfile.TemporaryDirectory() as tmp:
        study = optuna.create_study(storage=f"sqlite:///{tmp}/s.db", sampler=GeneticSampler(seed=0))
        study.optimize(_cond_objective, n_trials=150, catch=(ValueError,))
        out["sqlite/0"] = dump(study)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--against", help="commit to compare with (its ciq_optuna package)")
    ap.add_argument("--big", action="store_true", help="also a 5,000-trial replay")
    ap.add_argument("--dump", help=argparse.SUPPRESS)  # internal: run here, write JSON there
    args = ap.parse_args()
    if args.dump:
        Path(args.dump).write_text(json.dumps(run_scenarios(args.big), default=str))
        return
    if not args.against:
        ap.error("--against is required")
    with tempfile.TemporaryDirectory() as tmp:
        old = Path(tmp) / "old"
        old.mkdir()
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.against, "ciq_optuna"],
                                 check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)
        results = {}
        for name, path in (("this tree", ROOT), (args.against, old)):
            print(f"running the scenarios with {name} ...", flush=True)
            env = {**os.environ, "PYTHONPATH": str(path)}
            cmd = [sys.executable, __file__, "--dump", f"{tmp}/{len(results)}.json"] + (["--big"] if args.big else [])
            subprocess.run(cmd, env=env, check=True)
            results[name] = json.loads(Path(f"{tmp}/{len(results)}.json").read_text())
    new, ref = results["this tree"], results[args.against]
    same = True
    for key, trials in ref.items():
        mine = new.get(key, [])
        first = next((i for i, (a, b) in enumerate(zip(mine, trials)) if a != b), None)
        if first is None and len(mine) == len(trials):
            print(f"{key}: {len(trials)} trials, identical")
        else:
            same = False
            at = first if first is not None else min(len(mine), len(trials))
            print(f"{key}: DIFFERENT from trial {at}")
    print("all proposals identical" if same else "proposals differ")
    sys.exit(0 if same else 1)


if __name__ == "__main__":
    main()
