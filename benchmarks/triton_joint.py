"""Joint search (Triton meta-parameters + ptxas controls) against each alone, same budget, on compile metrics.

For each example kernel of examples/triton/ and each target, three ``ciq-optuna tune`` runs with the
same number of trials, seed and pipeline (baseline, screening, genetic search; no simplification,
which would add trials):

- ``joint``: the kernel's meta-parameter space and the ptxas space of Triton's ptxas;
- ``meta``: the meta-parameters alone (a ptxas space whose only control is ``-O3``, ptxas's default);
- ``ptxas``: the ptxas controls alone (a copy of the kernel file whose meta-parameters are fixed at
  the baseline, the first value of each list).

The objective is spill bytes for the matmul and the attention kernel (their baselines spill), and
registers for the RMSNorm kernel (it never spills); the table also shows the other metric of the
best trial. Ahead of time, no GPU.

Usage: nice -n 10 python benchmarks/triton_joint.py --trials 16 --out benchmarks/results/triton_joint.json
(``--kernels``/``--archs`` run a part, e.g. one process per kernel and target; ``--table A.json
B.json ...`` prints the table of several parts).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from ciq_optuna.tune import TuneConfig, tune

ROOT = Path(__file__).resolve().parents[1]
KERNELS = {
    "matmul": ("matmul.py", "matmul_kernel", "spill-bytes"),
    "attention": ("attention.py", "attention_fwd_kernel", "spill-bytes"),
    "rmsnorm": ("rmsnorm.py", "rmsnorm_kernel", "registers"),
}
ARCHS = ("sm_90a", "sm_80")
MODES = ("joint", "meta", "ptxas")

DEFAULT_ONLY_SPACE = """schema = 1
name = "ptxas"
compiler = "ptxas"
cuda = "{cuda}"
version = 1
description = "no ptxas control searched: -O3 is ptxas's default"

[[control]]
name = "opt_level"
flag = "-O{{value}}"
kind = "choice"
values = [3]
default = 3
archs = ["all"]
description = "the default only"
"""

FREEZE = """

# benchmark: meta-parameters fixed at the baseline (the first value of each list)
_spec = CIQ_OPTUNA[{name!r}]
_spec["constants"] = {{**_spec.get("constants", {{}}), **{{k: v[0] for k, v in _spec["space"].items()}}}}
_spec["space"] = {{}}
"""


def run(kernel: str, arch: str, mode: str, trials: int, seed: int, tmp: Path) -> dict:
    file, name, metric = KERNELS[kernel]
    source = ROOT / "examples" / "triton" / file
    spaces: list[Path] = []
    if mode == "ptxas":
        frozen = tmp / f"{kernel}_frozen.py"
        frozen.write_text(source.read_text() + FREEZE.format(name=name))
        source = frozen
    if mode == "meta":
        cuda = "13.4" if arch == "sm_90a" else "12.9"  # Triton's bundled ptxas for the target
        spaces = [tmp / f"default-only-{cuda}.toml"]
        spaces[0].write_text(DEFAULT_ONLY_SPACE.format(cuda=cuda))
    config = TuneConfig(
        kernel=Path(f"{source}:{name}"),
        arch=arch,
        minimize=[metric],
        trials=trials,
        seed=seed,
        spaces=spaces,
        acf=tmp / f"{kernel}-{arch}-{mode}.acf",
        workdir=tmp / "work",
        storage=f"sqlite:///{tmp / 'bench.db'}",
        study_name=f"{kernel}-{arch}-{mode}",
        progress=False,
        simplify=False,  # the same number of trials in every mode
    )
    start = time.perf_counter()
    result = tune(config)
    best = result.best[0]
    other = "registers" if metric == "spill-bytes" else "spill-bytes"
    return {
        "kernel": kernel,
        "arch": arch,
        "mode": mode,
        "metric": metric,
        "baseline": result.baseline.user_attrs["metrics"][metric] if result.baseline else None,
        "best": best.user_attrs["metrics"][metric],
        other: best.user_attrs["metrics"][other],
        "meta": {k: v for k, v in best.params.items() if not k.startswith("ptxas.")},
        "flags": best.user_attrs.get("flags", []),
        "trials": result.stats["trials"],
        "failed": result.stats["failed"],
        "seconds": round(time.perf_counter() - start, 1),
    }


def table(rows: list[dict]) -> str:
    """The joint-vs-alone table (best objective value per mode; the other metric in parentheses)."""
    lines = [
        "| kernel | arch | objective | baseline | joint | meta-parameters alone | ptxas alone |",
        "|---|---|---|---|---|---|---|",
    ]
    for kernel in KERNELS:
        for arch in ARCHS:
            r = {row["mode"]: row for row in rows if row["kernel"] == kernel and row["arch"] == arch}
            if set(r) != set(MODES):
                continue
            other = "registers" if r["joint"]["metric"] == "spill-bytes" else "spill-bytes"
            cells = [f"{r[m]['best']:g} ({r[m][other]:g} {other})" for m in MODES]
            lines.append(
                f"| {kernel} | {arch} | {r['joint']['metric']} | {r['joint']['baseline']:g} | "
                + " | ".join(cells)
                + " |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--kernels", default=",".join(KERNELS))
    parser.add_argument("--archs", default=",".join(ARCHS))
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--out", type=Path)
    parser.add_argument("--table", type=Path, nargs="+", help="print the table of these result files")
    args = parser.parse_args()
    if args.table:
        print(table([row for path in args.table for row in json.loads(path.read_text())["rows"]]))
        return
    rows = []
    with tempfile.TemporaryDirectory(prefix="ciq-triton-bench-") as tmp:
        for kernel in args.kernels.split(","):
            for arch in args.archs.split(","):
                for mode in args.modes.split(","):
                    row = run(kernel, arch, mode, args.trials, args.seed, Path(tmp))
                    rows.append(row)
                    print(json.dumps(row), flush=True)
                    if args.out:  # after every run, so a part survives an interruption
                        args.out.parent.mkdir(parents=True, exist_ok=True)
                        args.out.write_text(
                            json.dumps({"trials": args.trials, "seed": args.seed, "rows": rows}, indent=1)
                        )
    print()
    print(table(rows))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"trials": args.trials, "seed": args.seed, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
