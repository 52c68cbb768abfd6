"""Time of the distances' pairwise sum (``_distance.pairwise_sum``) in this tree against the
same function at a commit, on the term arrays GeneticSampler sums (genes x candidates x rows),
alternated round by round in one process; the minimum and median of the rounds.

Usage: nice -n 10 python benchmarks/pairwise_sum.py --against d2bca71 --rounds 20
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
MODULE = "ciq_optuna/samplers/_distance.py"
# (genes, candidates, rows): the nearest-neighbour pick of 4-16 children against the latest 256
# rows and 8 old survivors (15 genes: gemm_RTX_3090; 10, 8: convolution, dedispersion); the elite's
# 64 x 64 pairs
SHAPES = [(15, 4, 264), (15, 10, 264), (15, 16, 264), (15, 64, 64), (10, 10, 264), (8, 10, 264)]


def _load(path: Path, name: str):  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--against", required=True, help="commit of _distance.py to compare with")
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--calls", type=int, default=200, help="calls per round and side")
    args = ap.parse_args()
    text = subprocess.run(["git", "-C", str(ROOT), "show", f"{args.against}:{MODULE}"], check=True,
                          capture_output=True, text=True).stdout
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "at_commit.py").write_text(text)
        sides = {args.against: _load(Path(tmp) / "at_commit.py", "distance_at_commit"),
                 "this tree": _load(ROOT / MODULE, "distance_this_tree")}
    rng = np.random.default_rng(0)
    print(f"| terms (genes x candidates x rows) | {args.against}: min / median us | this tree: min / median us | same bits |")
    print("|---|---:|---:|:---:|")
    for shape in SHAPES:
        terms = rng.random(shape) * rng.choice([1e-3, 1.0, 1e3], (shape[0], 1, 1))
        times: dict[str, list[float]] = {label: [] for label in sides}
        for _ in range(args.rounds):
            for label, module in sides.items():
                spent = 0.0
                for _ in range(args.calls):
                    c = terms.copy()  # pairwise_sum overwrites its input; fresh in the cache, as a gather leaves it
                    t0 = time.perf_counter()
                    module.pairwise_sum(c)
                    spent += time.perf_counter() - t0
                times[label].append(1e6 * spent / args.calls)
        same = np.array_equal(*(m.pairwise_sum(terms.copy()) for m in sides.values()))
        cells = [f"{min(t):.1f} / {np.median(t):.1f}" for t in times.values()]
        print(f"| {' x '.join(map(str, shape))} | {cells[0]} | {cells[1]} | {'yes' if same else 'NO'} |")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
