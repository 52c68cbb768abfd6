"""Print the ptxas resource usage of the example kernels under a few ptxas settings (markdown).

Usage: python examples/measure.py [--release 13.0] [--arch sm_90a]
Numbers come from the real ptxas via ciq_optuna.compilers; compile time is the wall clock of
the ptxas process (noisy, ±10% on a quiet machine).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from ciq_optuna.compilers import get_compiler

HERE = Path(__file__).resolve().parent
KERNELS = ["sgemm", "attention", "stencil"]
SETTINGS: list[list[str]] = [
    [],
    ["-O0"],
    ["-O1"],
    ["--register-usage-level=10"],
    ["--maxrregcount=64"],
    ["--override-directive-values", "--maxrregcount=96"],
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--release", default=None, help="CUDA release of ptxas (default: first found)")
    parser.add_argument("--arch", default="sm_90a", choices=["sm_80", "sm_90a"])
    args = parser.parse_args()
    ptxas = get_compiler("ptxas", release=args.release)
    print(f"ptxas {ptxas.info.version}, {args.arch}\n")
    print(
        "| kernel | ptxas flags | registers | spill stores / loads (B) | stack frame (B) | compile time (s) |"
    )
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name in KERNELS:
            ptx = HERE / name / f"{name}.{args.arch}.ptx"
            for flags in SETTINGS:
                res = ptxas.compile(ptx, args.arch, flags, output=Path(tmp) / "k.cubin")
                shown = " ".join(flags) or "(defaults)"
                if not res.ok:
                    print(f"| {name} | `{shown}` | error: {res.error} | | | |")
                    continue
                (f,) = res.entries.values()
                print(
                    f"| {name} | `{shown}` | {f.registers} | {f.spill_stores} / {f.spill_loads} | "
                    f"{f.stack_frame} | {res.compile_time:.2f} |"
                )


if __name__ == "__main__":
    main()
