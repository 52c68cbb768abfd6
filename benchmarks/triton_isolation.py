"""Per-compile cost of isolating Triton compiles: the same kernel compiled in-process and isolated.

Alternates the two, ``--repeats`` times each after one warm-up of each (the first isolated
compile starts the fork server), checks that both give the same code hash and prints the
medians and their difference. ``--cold`` starts the fork server before the compilers exist (as
when another evaluation started it first), so it has not preloaded Triton: each child then
imports Triton and computes its ``triton_key()`` itself.

    python benchmarks/triton_isolation.py [--kernel examples/triton/rmsnorm.py:rmsnorm_kernel] [--arch sm_90a] [--cold]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from ciq_optuna.compilers.triton import TritonCompiler, load_kernel, triton_ptxas
from ciq_optuna.isolation import run_isolated


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernel", default="examples/triton/rmsnorm.py:rmsnorm_kernel")
    parser.add_argument("--arch", default="sm_90a")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--cold", action="store_true", help="fork server started without Triton preloaded")
    args = parser.parse_args()
    if args.cold:
        run_isolated(os.getpid, timeout=60)
    kernel = load_kernel(args.kernel)
    info = triton_ptxas(args.arch)
    compilers = {
        "in-process": TritonCompiler(info, kernel),
        "isolated": TritonCompiler(info, kernel, isolate=True),
    }
    times: dict[str, list[float]] = {name: [] for name in compilers}
    hashes: dict[str, set[str]] = {name: set() for name in compilers}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeats + 1):
            for name, compiler in compilers.items():
                start = time.perf_counter()
                res = compiler.compile(None, args.arch, [], output=Path(tmp) / f"{name}.cubin")
                seconds = time.perf_counter() - start
                if not res.ok:
                    raise SystemExit(f"{name}: {res.error}")
                hashes[name].add(res.code_hash)
                if i:  # the first round warms up (imports, fork server)
                    times[name].append(seconds)
    med = {name: statistics.median(t) for name, t in times.items()}
    cold = " (fork server without Triton preloaded)" if args.cold else ""
    print(
        f"{args.kernel} {args.arch}{cold}, {args.repeats} compiles each, wall seconds per compile (median):"
    )
    for name in compilers:
        print(f"  {name:10s} {med[name]:.3f} s")
    print(
        f"  overhead   {med['isolated'] - med['in-process']:+.3f} s ({med['isolated'] / med['in-process']:.2f}x)"
    )
    print(f"  same code hash: {hashes['in-process'] == hashes['isolated'] and len(hashes['isolated']) == 1}")


if __name__ == "__main__":
    main()
