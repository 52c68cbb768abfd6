"""``ciq-optuna explain ACF``: the winner's metrics and SASS diff against the defaults, and each control's share."""

from __future__ import annotations

import argparse
from pathlib import Path

from ciq_optuna.acf import read_acf
from ciq_optuna.errors import CiqError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "explain",
        help="what an ACF's winner changed against the compiler defaults, and which control did it",
        description=(
            "Compile the kernel with the compiler defaults and with the ACF's flags; print the ptxas -v "
            "metrics diff, the SASS instruction mix by opcode class (cuobjdump/nvdisasm), and each "
            "control's effect on the objectives alone and when removed from the winner (from the "
            "study's screening and simplification trials when the study is reachable, else compiled)."
        ),
    )
    p.add_argument("acf", type=Path)
    p.add_argument(
        "--kernel",
        type=Path,
        help=(
            "the kernel, path.py for a Triton ACF (default: the path a store entry records, else a file of "
            "the kernel's name beside the ACF or here, else where the ACF's study recorded it)"
        ),
    )
    p.add_argument(
        "--compiler-path", help="the ptxas/nvcc to compile with (default: located; Triton: the ptxas it runs)"
    )
    p.add_argument("--storage", help="where the ACF's study is (default: the storage the ACF records)")
    p.add_argument(
        "--no-study", action="store_true", help="compile every attribution instead of reading the study"
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ciq_optuna.explain import (  # lazy: --help
        compiler_for_acf,
        explain,
        find_kernel,
        format_explanation,
        load_study_of,
    )
    from ciq_optuna.store import kernel_file
    from ciq_optuna.study.metadata import file_sha256

    acf = read_acf(args.acf)
    study, why = (None, "--no-study") if args.no_study else load_study_of(acf, args.storage)
    kernel = args.kernel or find_kernel(args.acf, acf, study)
    if kernel is None and args.no_study:  # the study only tells where the kernel is
        kernel = find_kernel(args.acf, acf, load_study_of(acf, args.storage)[0])
    if kernel is None:
        raise CiqError(
            f"where is the kernel {acf.kernel.get('name', '')}? it is neither beside the ACF, nor in "
            "the working directory, nor where the ACF's study recorded it: pass --kernel PATH"
        )
    path = kernel_file(kernel)
    if not path.is_file():
        raise CiqError(f"kernel not found: {path}")
    if acf.kernel.get("sha256") and file_sha256(path) != acf.kernel["sha256"]:
        raise CiqError(f"{path} is not the kernel this ACF was tuned for (sha256 differs)")
    path, compiler = compiler_for_acf(acf, path, args.compiler_path)
    ex = explain(acf, path, compiler, study=study)
    if study is None:
        ex.notes.append(f"study not used ({why}): attributions compiled now")
    print(format_explanation(ex))
    return 0
