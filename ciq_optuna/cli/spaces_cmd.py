"""``ciq-optuna spaces list|show|check``: the compiler search spaces."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from ciq_optuna.cli.types import NORMAL
from ciq_optuna.errors import CiqError

if TYPE_CHECKING:
    from ciq_optuna.space.compiler_space import CompilerSpace


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("spaces", help="list, show and check compiler search spaces")
    s_sub = p.add_subparsers(dest="spaces_command", metavar="ACTION", required=True)

    s = s_sub.add_parser("list", help="the space files found")
    s.set_defaults(func=_list)

    s = s_sub.add_parser("show", help="the controls of a space")
    s.add_argument("space", help="a space file, or COMPILER-CUDA such as ptxas-13.0")
    s.add_argument("--arch", help="only the controls that exist for this architecture")
    s.set_defaults(func=_show)

    s = s_sub.add_parser("check", help="check a space against an installed compiler")
    s.add_argument("space", nargs="?", help="a space file (default: the one matching the compiler)")
    s.add_argument(
        "--compiler",
        choices=["ptxas", "nvcc"],
        help="compiler to check against (default: the space file's, else ptxas)",
    )
    s.add_argument("--compiler-path", help="the compiler executable")
    s.add_argument("--arch", default="sm_90a")
    s.add_argument("--kernel", type=Path, help="reference kernel (default: the one shipped with ciq-optuna)")
    s.add_argument("--quick", action="store_true", help="only check that every flag and value is accepted")
    s.set_defaults(func=_check)


def _load(name: str) -> CompilerSpace:
    from ciq_optuna.space.compiler_space import CompilerSpace
    from ciq_optuna.space.files import find_space

    path = Path(name)
    if path.suffix == ".toml" or path.exists():
        return CompilerSpace.load(path)
    compiler, _, cuda = name.partition("-")
    return CompilerSpace.load(find_space(compiler, cuda))


def _list(args: argparse.Namespace) -> int:
    from ciq_optuna.space.compiler_space import CompilerSpace
    from ciq_optuna.space.files import available_spaces

    files = available_spaces()
    if not files:
        raise CiqError("no space files found (set $CIQ_OPTUNA_SPACES to a directory of space files)")
    for f in files:
        space = CompilerSpace.load(f.path)
        print(f"{f.compiler}-{f.cuda}  v{space.version}  {len(space.controls):2d} controls  {f.path}")
    return 0


def _show(args: argparse.Namespace) -> int:
    from ciq_optuna.space.controls import IntControl

    space = _load(args.space)
    if args.arch:
        space = space.for_arch(args.arch)
    print(f"{space.name} for CUDA {space.cuda} (file version {space.version}, sha256 {space.sha256[:12]}...)")
    for c in space.controls:
        states = (
            f"{c.low}..{c.high}" + (" (powers of 2)" if c.log else f" step {c.step}")
            if isinstance(c, IntControl)
            else ", ".join(map(str, c.values()))
        )
        cond = " when " + str(dict(c.when)) if c.when else ""
        cond += " when any of " + str(list(c.when_any)) if c.when_any else ""
        print(f"  {c.name:32s} {c.kind:6s} {c.flag:36s} default {c.default!s:8s} [{states}]{cond}")
        print(f"  {'':32s} {c.description}")
    return 0


def _check(args: argparse.Namespace) -> int:
    from ciq_optuna.compilers.base import get_compiler
    from ciq_optuna.space.check import check_space
    from ciq_optuna.space.compiler_space import CompilerSpace
    from ciq_optuna.space.files import find_space

    space = _load(args.space) if args.space else None
    compiler = get_compiler(args.compiler or (space.compiler if space else "ptxas"), args.compiler_path)
    if space is None:
        space = CompilerSpace.load(find_space(compiler.name, compiler.info.release))
    compiler.check_arch(args.arch)
    report = check_space(
        space,
        compiler,
        arch=args.arch,
        reference_kernel=args.kernel,
        progress=args.verbosity == NORMAL,
        quick=args.quick,
    )
    print(report.format_table())
    return report.exit_code
