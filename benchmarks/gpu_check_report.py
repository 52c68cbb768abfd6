"""The results table of benchmarks/gpu_check.sh: baseline and best times, speedup, validation verdict.

Reads the CUDA run's summary (examples/gpu/nvcc_gemm/tune_nvcc.py --summary), the Triton run's
study (ciq-optuna tune --storage) and the validation records written next to the ACFs.

Usage: python benchmarks/gpu_check_report.py --nvcc-summary S.json --triton-storage URL --triton-acf A.acf
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import optuna


def verdict(acf: Path | None) -> str:
    """KEPT / REJECTED (reason) from the ACF's validation record, or why there is none."""
    if acf is None or not acf.is_file():
        return "no ACF (the baseline won)"
    record = acf.with_suffix(".validation.json")
    if not record.is_file():
        return "not validated (no record)"
    doc = json.loads(record.read_text())
    return doc["decision"] if doc["decision"] == "KEPT" else f"{doc['decision']} ({doc['reason']})"


def triton_row(storage: str, acf: Path) -> dict[str, Any]:
    from ciq_optuna.summary import baseline_trial, best_trials, dedup_stats

    (summary,) = optuna.get_all_study_summaries(storage)
    study = optuna.load_study(study_name=summary.study_name, storage=storage)
    base, best = baseline_trial(study), best_trials(study)
    base_ms = (base.user_attrs.get("measured") or {}).get("time_ms") if base else None
    best_measured = best[0].user_attrs.get("measured") if best else None
    if best and best_measured is None and "reused_from" in best[0].user_attrs:
        source = study.trials[best[0].user_attrs["reused_from"]]
        best_measured = source.user_attrs.get("measured")
    stats = dedup_stats(study)
    return {
        "kernel": f"{study.user_attrs['ciq_optuna']['kernel']['name']} (Triton)",
        "arch": study.user_attrs["ciq_optuna"]["arch"],
        "baseline_ms": base_ms,
        "best_ms": (best_measured or {}).get("time_ms"),
        "trials": stats["trials"],
        "reused": stats["reused_measurements"],
        "verdict": verdict(acf),
    }


def nvcc_row(summary: Path) -> dict[str, Any]:
    doc = json.loads(summary.read_text())
    acf = Path(doc["acf"])
    return {
        "kernel": doc["kernel"],
        "arch": doc["arch"],
        "baseline_ms": doc["baseline_ms"],
        "best_ms": doc["best_ms"],
        "trials": doc["trials"],
        "reused": doc["reused"],
        "verdict": verdict(acf if acf.is_file() else None),
    }


def table(rows: list[dict[str, Any]]) -> str:
    def ms(v: Any) -> str:
        return "-" if v is None else f"{v:.4f}"

    lines = [
        "| kernel | arch | baseline ms | best ms | speedup | validation | trials | reused measurements |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        speed = "-" if not (r["baseline_ms"] and r["best_ms"]) else f"{r['baseline_ms'] / r['best_ms']:.3f}x"
        lines.append(
            f"| {r['kernel']} | {r['arch']} | {ms(r['baseline_ms'])} | {ms(r['best_ms'])} | {speed} | "
            f"{r['verdict']} | {r['trials']} | {r['reused']} |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nvcc-summary", type=Path)
    ap.add_argument("--triton-storage")
    ap.add_argument("--triton-acf", type=Path)
    args = ap.parse_args()
    rows = []
    if args.nvcc_summary and args.nvcc_summary.is_file():
        rows.append(nvcc_row(args.nvcc_summary))
    if args.triton_storage:
        try:
            rows.append(triton_row(args.triton_storage, args.triton_acf))
        except Exception as exc:  # a run that stopped early leaves no study or no trials to report
            print(f"Triton run: no result ({type(exc).__name__}: {exc})")
    print(table(rows))


if __name__ == "__main__":
    main()
