"""``ciq-optuna check [STORE]``: for CI, is every tuning in the store still good with the installed compiler?"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from ciq_optuna.cli.types import QUIET, positive_int
from ciq_optuna.errors import CiqError
from ciq_optuna.store import STORE_ENV, Store

EXIT_STALE = 1


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "check",
        help="check every ACF of a store with the installed compiler (exit 1 if any is stale)",
        description=(
            "For every ACF of STORE, with the installed compiler: does it still apply (kernel unchanged, "
            "space known, flags accepted), does it still produce the recorded binary, is it still no "
            "worse than the compiler defaults on its objectives (compile metrics compiled now; runtime "
            "objectives timed on the GPU, else reported 'not checked: no GPU', not stale unless "
            "--require-runtime)? Prints a table (or JSON) and exits 1 if any entry is stale, 0 "
            "otherwise. Nothing is deleted."
        ),
    )
    p.add_argument("store", type=Path, nargs="?", help=f"the store directory (default ${STORE_ENV})")
    p.add_argument("--compiler-path", help="the compiler to check with (a ptxas/nvcc, or a bin directory)")
    p.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    p.add_argument(
        "--allow-changed-binary",
        action="store_true",
        help="an entry whose code changed but is still no worse than the defaults is not stale",
    )
    p.add_argument(
        "--require-runtime",
        action="store_true",
        help="an entry with a runtime objective that could not be timed (no GPU, no launch) is stale",
    )
    p.add_argument(
        "--repeats",
        type=positive_int,
        default=100,
        help="timed rounds of a runtime check (default %(default)s)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ciq_optuna.check import check_store, format_table  # lazy: keeps --help fast
    from ciq_optuna.gpu.check import runtime_check

    root = args.store or os.environ.get(STORE_ENV)
    if not root:
        raise CiqError(f"no store given: pass STORE or set ${STORE_ENV}")
    store = Store(root)
    store.check_exists()
    quiet = args.json or args.verbosity == QUIET
    say = None if quiet else (lambda text: print(text, file=sys.stderr, flush=True))
    rows = check_store(
        store,
        compiler_path=args.compiler_path,
        allow_changed_binary=args.allow_changed_binary,
        progress=say,
        runtime=runtime_check(store.root, repeats=args.repeats, compiler_path=args.compiler_path),
        require_runtime=args.require_runtime,
    )
    stale = sum(r.stale for r in rows)
    unchecked = sum(r.runtime_not_checked for r in rows)
    if args.json:
        json.dump(
            {
                "store": str(store.root),
                "entries": len(rows),
                "stale": stale,
                "runtime_not_checked": unchecked,
                "results": [r.to_dict() for r in rows],
            },
            sys.stdout,
            indent=2,
        )
        print()
    else:
        print(format_table(rows))
        runtime = f", {unchecked} with a runtime objective not checked" if unchecked else ""
        print(f"{len(rows)} entr{'y' if len(rows) == 1 else 'ies'}, {stale} stale{runtime}")
    return EXIT_STALE if stale else 0
