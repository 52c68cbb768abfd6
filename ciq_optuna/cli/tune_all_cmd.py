"""``ciq-optuna tune-all MANIFEST``: tune kernels × archs × objectives into an ACF store."""

from __future__ import annotations

import argparse
from pathlib import Path

from ciq_optuna.cli.types import QUIET, positive_int


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "tune-all",
        help="tune every kernel x arch x objective of a manifest into a store (skips what is stored)",
        description=(
            "Tune the kernels listed in MANIFEST (TOML, see docs/store.md) for each architecture and "
            "objective, writing each winner into the store. Jobs already in the store for the installed "
            "compiler are skipped; an interrupted job resumes (each is an ordinary tune study, which "
            "'ciq-optuna worker' can join). Exit 1 if a job failed."
        ),
    )
    p.add_argument("manifest", type=Path)
    p.add_argument("--store", type=Path, help="the ACF store (default: 'store' in the manifest)")
    p.add_argument("--storage", help="Optuna storage URL (default: the manifest's, else as for tune)")
    p.add_argument("--compiler-path", help="the ptxas/nvcc to use, or a bin directory holding them")
    p.add_argument("--jobs", type=positive_int, default=1, help="trials in parallel within each tuning")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ciq_optuna.tune_all import format_summary, load_manifest, tune_all  # lazy: keeps --help fast

    manifest = load_manifest(args.manifest)
    results = tune_all(
        manifest,
        store=args.store,
        storage=args.storage,
        compiler_path=args.compiler_path,
        jobs_per_tune=args.jobs,
        progress=args.verbosity != QUIET,
        say=print if args.verbosity != QUIET else (lambda text: None),
    )
    print()
    print(format_summary(results))
    counts = {s: sum(r.status == s for r in results) for s in ("tuned", "in store", "failed")}
    print(", ".join(f"{n} {s}" for s, n in counts.items()))
    return 1 if counts["failed"] else 0
