"""``ciq-optuna acf show|flags|export|verify|from-study``: read and apply ACFs."""

from __future__ import annotations

import argparse
import shlex
import sys
import tempfile
from pathlib import Path

import tomli_w

from ciq_optuna.acf import Acf, read_acf, write_acf
from ciq_optuna.acf import release_of as _release
from ciq_optuna.cli.types import QUIET
from ciq_optuna.compilers.base import Compiler, get_compiler
from ciq_optuna.compilers.locate import find_compiler, list_compilers
from ciq_optuna.errors import CiqError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("acf", help="show, export, apply and verify ACF files")
    acf_sub = p.add_subparsers(dest="acf_command", metavar="ACTION", required=True)

    s = acf_sub.add_parser("show", help="print an ACF's content after verifying its checksum")
    s.add_argument("acf", type=Path)
    s.set_defaults(func=_show)

    s = acf_sub.add_parser("flags", help="print the flags, for $(...) in a compile command")
    s.add_argument("acf", type=Path)
    s.add_argument("--xptxas", action="store_true", help="as one nvcc -Xptxas argument (ptxas ACFs)")
    s.set_defaults(func=_flags)

    s = acf_sub.add_parser(
        "triton", help="print the triton.Config (meta-parameters and ptxas flags) of a Triton kernel's ACF"
    )
    s.add_argument("acf", type=Path)
    s.set_defaults(func=_triton)

    s = acf_sub.add_parser("export", help="write a compiler options file (ptxas/nvcc --options-file)")
    s.add_argument("acf", type=Path)
    s.add_argument("-o", "--output", type=Path, help="options file to write (default: ACF name with .opts)")
    s.set_defaults(func=_export)

    s = acf_sub.add_parser(
        "verify",
        help="recompile KERNEL (or a Triton path.py[:NAME]) with the ACF and check the code hash it records",
    )
    s.add_argument("acf", type=Path)
    s.add_argument("kernel", type=Path)
    s.add_argument("--compiler-path", help="ptxas or nvcc to use")
    s.set_defaults(func=_verify)

    s = acf_sub.add_parser("from-study", help="write the ACF of any trial of a study (e.g. a Pareto point)")
    s.add_argument("--storage", help="Optuna storage URL (default sqlite:///ciq-optuna.db)")
    s.add_argument("--study", required=True, dest="study_name")
    s.add_argument("--trial", type=int, help="trial number (default: the best trial)")
    s.add_argument("-o", "--output", type=Path, required=True)
    s.add_argument("--kernel", type=Path, help="the kernel here, if it moved since the study was made")
    s.add_argument("--compiler-path", help="the compiler here, if it is not where the study found it")
    s.set_defaults(func=_from_study)


def _show(args: argparse.Namespace) -> int:
    acf = read_acf(args.acf)
    doc = acf.to_document()
    sys.stdout.write(tomli_w.dumps(doc))
    return 0


def _flags(args: argparse.Namespace) -> int:
    acf = read_acf(args.acf)
    print(acf.xptxas_arg() if args.xptxas else shlex.join(acf.flags))
    return 0


def _triton(args: argparse.Namespace) -> int:
    from ciq_optuna.triton_acf import config_text

    print(config_text(read_acf(args.acf), args.acf.name))
    return 0


def _export(args: argparse.Namespace) -> int:
    acf = read_acf(args.acf)
    out = args.output or args.acf.with_suffix(".opts")
    _check_output(out)
    try:
        out.write_text(acf.options_file_text(), encoding="utf-8")
    except OSError as exc:
        raise CiqError(f"cannot write {out}: {exc.strerror}") from None
    tool = "ptxas" if acf.compiler == "ptxas" else "nvcc"
    print(f"wrote {out}: {tool} -arch={acf.arch} --options-file {out} ...", file=sys.stderr)
    warning = _version_warning(acf) if args.verbosity != QUIET else None
    if warning:
        print(warning, file=sys.stderr)
    return 0


def _version_warning(acf: Acf) -> str | None:
    """A warning when the compiler a user would run (the first found) is not the ACF's release."""
    try:
        default = find_compiler(acf.compiler)
    except CiqError:
        return None
    if default.release == _release(acf.compiler_version):
        return None
    matching = [i for i in list_compilers(acf.compiler) if i.release == _release(acf.compiler_version)]
    where = f" (one is installed: {matching[0].path})" if matching else ""
    return (
        f"warning: this ACF was tuned with {acf.compiler} {acf.compiler_version}; the {acf.compiler} found "
        f"first here is {default.version} ({default.path}), which may compile other code: apply it with "
        f"a {acf.compiler} {_release(acf.compiler_version)}{where}"
    )


def _compiler_for(acf: Acf, path: str | None) -> Compiler:
    """The compiler to verify ``acf`` with: ``path``, else an installed one of the ACF's release
    (the exact version first), found as ``compilers.locate`` finds compilers."""
    if path is not None:
        return get_compiler(acf.compiler, path)
    installed = list_compilers(acf.compiler)
    for info in sorted(installed, key=lambda i: i.version != acf.compiler_version):
        if info.release == _release(acf.compiler_version):
            return get_compiler(acf.compiler, info.path)
    return get_compiler(acf.compiler)  # check_compiler then says which release is missing


def _verify(args: argparse.Namespace) -> int:
    acf = read_acf(args.acf)
    if acf.triton:
        return _verify_triton(args, acf)
    compiler = _compiler_for(acf, args.compiler_path)
    acf.check_compiler(compiler.name, compiler.info.version)
    want = acf.binary.get("code_sha256")
    if not want:
        raise CiqError(f"{args.acf} records no binary hash to verify against")
    with tempfile.TemporaryDirectory(prefix="ciq-verify-") as tmp:
        opts = Path(tmp) / "acf.opts"
        opts.write_text(acf.options_file_text(), encoding="utf-8")
        result = compiler.compile(
            args.kernel, acf.arch, [], output=Path(tmp) / "out.cubin", options_file=opts, verbose=False
        )
    if not result.ok:
        raise CiqError(f"the kernel does not compile with this ACF: {result.error}")
    if result.code_hash != want:
        print(
            f"MISMATCH: {args.kernel} compiles to code {result.code_hash[:16]}..., the ACF records "
            f"{want[:16]}... (another kernel version?)"
        )
        return 1
    print(f"OK: {args.kernel} with {args.acf} reproduces the tuned code ({want[:16]}...)")
    return 0


def _verify_triton(args: argparse.Namespace, acf) -> int:
    """Compile the Triton kernel through the ACF's triton.Config (as a launch would) and check the code hash."""
    from ciq_optuna.compilers.triton import load_kernel
    from ciq_optuna.triton_acf import apply_acf, compile_config

    ref = str(args.kernel) if ":" in str(args.kernel) else f"{args.kernel}:{acf.triton['kernel']}"
    kernel = load_kernel(ref)
    config = apply_acf(acf, kernel.fn)
    _, got = compile_config(kernel, config, acf.arch)
    want = acf.binary.get("code_sha256", "")
    if got != want:
        print(f"MISMATCH: {ref} compiles to code {got[:16]}..., the ACF records {want[:16]}...")
        return 1
    print(f"OK: {ref} with {args.acf} reproduces the tuned code ({want[:16]}...)")
    return 0


def _from_study(args: argparse.Namespace) -> int:
    import optuna

    from ciq_optuna.objectives.factory import build_objective
    from ciq_optuna.study.metadata import metadata
    from ciq_optuna.study.storage import (
        DEFAULT_STORAGE_FILE,
        redact,
        resolve_storage,
        sqlite_path,
        storage_url,
    )
    from ciq_optuna.summary import acf_for_trial, best_trials

    _check_output(args.output)
    shown = redact(storage_url(args.storage, default_path=DEFAULT_STORAGE_FILE))
    db_file = sqlite_path(storage_url(args.storage, default_path=DEFAULT_STORAGE_FILE))
    if db_file is not None and not db_file.is_file():
        raise CiqError(f"no study database at {db_file}")
    storage = resolve_storage(args.storage, default_path=DEFAULT_STORAGE_FILE, heartbeat_interval=None)
    try:
        study = optuna.load_study(study_name=args.study_name, storage=storage)
    except KeyError:
        raise CiqError(f"no study named {args.study_name!r} in {shown}") from None
    meta = metadata(study)
    objective = build_objective(meta, kernel=args.kernel, compiler_path=args.compiler_path)
    if args.trial is None:
        best = best_trials(study)
        if not best:
            raise CiqError(f"study {args.study_name!r} has no complete trial")
        trial = best[0]
    else:
        trials = [t for t in study.get_trials(deepcopy=False) if t.number == args.trial]
        if not trials or trials[0].state != optuna.trial.TrialState.COMPLETE:
            raise CiqError(f"study {args.study_name!r} has no complete trial {args.trial}")
        trial = trials[0]
    path = write_acf(args.output, acf_for_trial(study, trial, meta, objective, shown))
    print(f"wrote {path} (trial {trial.number})")
    return 0


def _check_output(path: Path) -> None:
    if path.is_dir():
        raise CiqError(f"{path} is a directory; give a file name")
    if not path.parent.is_dir():
        raise CiqError(f"cannot write {path}: directory {path.parent} does not exist")
