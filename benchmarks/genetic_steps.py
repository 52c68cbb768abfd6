"""CPU time of single per-trial steps of GeneticSampler at a commit and in this tree, on the state
both reach after replaying ``gemm_RTX_3090`` (in-memory storage, seed 0; the same proposals, so the
same state), alternated round by round in one process: encoding a trial's parameters, adding a row
to the conditional-parameter evidence, the rules' update, the nearest-neighbour score of 4, 10 and
16 children, the distances of 16 or 160 children to the rows that score compares them with (per
child).  Minimum and median of the rounds, microseconds per call.

Usage: nice -n 10 python benchmarks/genetic_steps.py --against d2bca71 --trials 900 --rounds 15
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import optuna
from optuna.trial import TrialState

sys.path.insert(0, str(Path(__file__).resolve().parent))
import replay  # noqa: E402


def _state(name: str, space: replay.Space, trials: int) -> tuple:
    sampler = replay.build_sampler(name, 0)
    study = optuna.create_study(sampler=sampler)
    for _ in range(trials):
        trial = study.ask()
        rec = space.table.get(tuple(trial.suggest_categorical(k, space.values[k]) for k in space.keys))
        study.tell(trial, rec[0] if rec else None, state=TrialState.COMPLETE if rec else TrialState.FAIL)
    return sampler, study


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--against", required=True)
    ap.add_argument("--trials", type=int, default=900)
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args()
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    warnings.simplefilter("ignore")
    space = replay.load_space("gemm_RTX_3090")
    sides = {name: _state(name, space, args.trials) for name in (f"genetic@{args.against}", "genetic")}
    params = [t.params for t in sides["genetic"][1].trials[-200:]]

    def encode(s, _study) -> int:  # type: ignore[no-untyped-def]
        for p in params:
            s._encode_list(p)
        return len(params)

    def evidence(s, _study) -> int:  # type: ignore[no-untyped-def]
        d = len(s._names)
        act = sys.modules[type(s).__module__]._Activation(d)
        rows = s._x[:200, :d].tolist()
        for row in rows:
            act.add_list(row)
        return len(rows)

    def rules(s, _study) -> int:  # type: ignore[no-untyped-def]
        for _ in range(200):
            s._rules_n = -1
            s._learn_activation()
        return 200

    def knn(s, _study) -> int:  # type: ignore[no-untyped-def]
        order = s._order()
        children = s._children(order, 16, 1.0)
        for _ in range(50):
            for m in (4, 10, 16):
                s._knn_score(children[:m], order)
        return 150

    def distances(m: int) -> Callable:
        def step(s, _study) -> int:  # type: ignore[no-untyped-def]
            order = s._order()
            n, lo = s._n, max(0, s._n - s._window)
            elite = order[: s._survivors()]
            old = np.sort(elite[elite < lo])
            idx = np.concatenate([old, np.arange(lo, n)])
            children = s._children(order, m, 1.0)
            for _ in range(20):
                s._distances(children, idx, len(old))
            return 20 * m  # per child

        return step

    steps: list[tuple[str, Callable]] = [
        ("`_encode_list`: a trial's parameters", encode),
        ("`_Activation.add_list`: one row (made at every trial at the commit)", evidence),
        ("`_learn_activation`: the rules, once per trial", rules),
        ("`_knn_score`: 4, 10 or 16 children", knn),
        ("`_distances` to the compared rows, per child: 16 children in one call", distances(16)),
        ("`_distances` to the compared rows, per child: 160 children in one call", distances(160)),
    ]
    print(f"| step (microseconds per call, min / median of {args.rounds} rounds) | {' | '.join(sides)} |")
    print("|---|" + "---:|" * len(sides))
    for label, step in steps:
        times: dict[str, list[float]] = {name: [] for name in sides}
        for _ in range(args.rounds):
            for name, (sampler, study) in sides.items():
                t0 = time.thread_time()
                calls = step(sampler, study)
                times[name].append(1e6 * (time.thread_time() - t0) / calls)
        print(f"| {label} | " + " | ".join(f"{min(t):.2f} / {np.median(t):.2f}" for t in times.values()) + " |")


if __name__ == "__main__":
    main()
