"""``ciq-optuna store add|list|lookup``: the ACF store of a repository of kernels."""

from __future__ import annotations

import argparse
import os
import shlex
from pathlib import Path

from ciq_optuna.acf import read_acf
from ciq_optuna.errors import CiqError
from ciq_optuna.store import STORE_ENV, Store, duplicate_message, lookup


def _store_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", type=Path, help=f"the store directory (default ${STORE_ENV})")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("store", help="add, list and look up tunings in an ACF store")
    s_sub = p.add_subparsers(dest="store_command", metavar="ACTION", required=True)

    s = s_sub.add_parser("add", help="add an ACF (e.g. a Pareto point) to the store")
    s.add_argument("acf", type=Path)
    s.add_argument(
        "--kernel",
        type=Path,
        required=True,
        help="the kernel it was tuned for (a Triton kernel: path.py:name)",
    )
    s.add_argument(
        "--launch",
        metavar="FILE.py:NAME",
        help="how to launch the kernel on a GPU (a KernelLaunch, as for validate), so that check can "
        "time a runtime objective",
    )
    _store_arg(s)
    s.add_argument("--force", action="store_true", help="replace an entry with the same key")
    s.set_defaults(func=_add)

    s = s_sub.add_parser("list", help="every entry, damaged files and duplicate keys")
    _store_arg(s)
    s.set_defaults(func=_list)

    s = s_sub.add_parser(
        "lookup", help="the flags for KERNEL on ARCH with the installed compiler, or 'none: use the defaults'"
    )
    s.add_argument("kernel", type=Path, help="the kernel file (a Triton kernel: path.py:name)")
    s.add_argument("--arch", required=True)
    s.add_argument("--compiler-path", help="the ptxas or nvcc the flags are for (default: located)")
    s.add_argument("--objective", help="the objective, when the store holds several for this kernel")
    _store_arg(s)
    s.set_defaults(func=_lookup)


def store_of(args: argparse.Namespace) -> Store:
    root = args.store or os.environ.get(STORE_ENV)
    if not root:
        raise CiqError(f"no store given: pass --store DIR or set ${STORE_ENV}")
    return Store(root)


def _add(args: argparse.Namespace) -> int:
    path = store_of(args).add(read_acf(args.acf), kernel=args.kernel, force=args.force, launch=args.launch)
    print(f"stored {path}")
    return 0


def _list(args: argparse.Namespace) -> int:
    st = store_of(args)
    scan = st.scan()
    for e in scan.entries:
        flags = shlex.join(e.acf.flags) or "(no flags: the defaults won)"
        print(f"{e.path.relative_to(st.root)}: {e.key.describe()}: {flags}")
    for key, entries in scan.duplicates.items():
        print(f"error: {duplicate_message(key, entries)}")
    for p in scan.problems:
        print(f"error: {p.path}: {p.message}")
    print(f"{len(scan.entries)} entr{'y' if len(scan.entries) == 1 else 'ies'}, {len(scan.problems)} damaged")
    return 1 if scan.problems or scan.duplicates else 0


def _lookup(args: argparse.Namespace) -> int:
    from ciq_optuna.compilers.base import compiler_for_source
    from ciq_optuna.compilers.triton import is_triton_ref, triton_ptxas

    if is_triton_ref(args.kernel):  # path.py:kernel: the ptxas Triton runs (or --compiler-path)
        compiler = None if args.compiler_path is None else triton_ptxas(args.arch, args.compiler_path)
    else:
        compiler = compiler_for_source(args.kernel, args.compiler_path)
    found = lookup(args.kernel, args.arch, compiler, store=store_of(args), objective=args.objective)
    print("none: use the defaults" if found is None else shlex.join(found.flags))
    if found is not None and found.triton:
        t = found.triton
        print(f"triton: {' '.join(f'{k}={v!r}' for k, v in {**t['constexprs'], **t['options']}.items())}")
    return 0
