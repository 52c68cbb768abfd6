"""Start-up time of the ``ciq-optuna`` command against ``python -c "import optuna"`` (BENCHMARKS.md).

    nice -n 10 python benchmarks/startup.py [--runs 15]

Each command runs ``--runs`` times, round robin (a change in machine load hits every command
alike); the table gives the median wall-clock seconds and the ratio to ``import optuna``'s median.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from ciq_optuna.acf import Acf, write_acf  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    acf = Path(tempfile.mkdtemp()) / "k.acf"
    cli = [sys.executable, "-m", "ciq_optuna.cli"]
    write_acf(
        acf,
        Acf(
            compiler="ptxas",
            compiler_version="13.0.88",
            arch="sm_90a",
            flags=["-O3", "--maxrregcount=64"],
            controls={},
            space={"name": "ptxas", "version": 1},
            objectives=[{"metric": "registers", "direction": "minimize"}],
        ),
    )
    commands = {
        'python -c "import optuna"': [sys.executable, "-c", "import optuna"],
        "ciq-optuna --help": [*cli, "--help"],
        "ciq-optuna acf flags ACF": [*cli, "acf", "flags", str(acf)],
        'python -c "import ciq_optuna"': [sys.executable, "-c", "import ciq_optuna"],
    }
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(args.runs):
        for name, argv in commands.items():
            start = time.perf_counter()
            subprocess.run(argv, check=True, capture_output=True, cwd=REPO)
            times[name].append(time.perf_counter() - start)
    base = statistics.median(times['python -c "import optuna"'])
    print(f"# {' '.join(sys.argv)} (runs={args.runs})")
    print("| command | median s | ratio to import optuna |")
    print("|---|---:|---:|")
    for name, ts in times.items():
        print(f"| `{name}` | {statistics.median(ts):.3f} | {statistics.median(ts) / base:.2f} |")


if __name__ == "__main__":
    main()
