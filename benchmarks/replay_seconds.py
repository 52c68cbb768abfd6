"""Median sampler seconds per run (replay.py's ``seconds``) per dataset and sampler, and the
ratio to a base sampler.  Usage: ``python replay_seconds.py BASE RESULTS.jsonl.gz ...``."""

from __future__ import annotations

import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import replay  # noqa: E402


def main(base: str, paths: list[str]) -> None:
    runs: dict[tuple[str, str], list[float]] = defaultdict(list)
    for r in replay._load_rows(paths):
        runs[(r["dataset"], r["sampler"])].append(r["seconds"])
    print("| dataset | sampler | runs | median s/run | vs base |")
    print("|---|---|---|---|---|")
    for ds in sorted({d for d, _ in runs}):
        ref = statistics.median(runs[(ds, base)]) if (ds, base) in runs else None
        for s in sorted({s for _, s in runs}):
            if (ds, s) in runs:
                m = statistics.median(runs[(ds, s)])
                ratio = f"{m / ref:.3f}" if ref else ""
                print(f"| {ds} | `{s}` | {len(runs[(ds, s)])} | {m:.3f} | {ratio} |")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
