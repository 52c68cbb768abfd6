"""``ciq-optuna validate``: arguments and entry point, for the CLI to wire in one line.

validate = sub.add_parser("validate", help="re-measure ACFs against the baseline on the GPU")
add_validate_arguments(validate); validate.set_defaults(func=run_validate)
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import sys
from pathlib import Path
from typing import Any

from ciq_optuna.cli.types import QUIET, positive_int
from ciq_optuna.compilers.triton import is_triton_ref, load_kernel
from ciq_optuna.errors import EXIT_USER_ERROR, CiqError
from ciq_optuna.gpu.harness import KernelLaunch
from ciq_optuna.gpu.winners import ValidationSettings, validate_acfs


def add_validate_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``validate`` arguments to ``parser``."""
    d = ValidationSettings()
    parser.add_argument(
        "acfs", nargs="+", type=Path, help="ACF files to validate (top candidates, Pareto front)"
    )
    parser.add_argument(
        "--launch",
        metavar="MODULE:NAME",
        help="a KernelLaunch (or a function returning one): 'package.module:NAME' or 'path/file.py:NAME' "
        "(not for Triton kernels: their file's launch function is used)",
    )
    parser.add_argument(
        "--kernel",
        required=True,
        type=Path,
        help="kernel source compiled under each ACF (.ptx or .cu), or a Triton kernel path.py:NAME",
    )
    parser.add_argument("--arch", help="target architecture (default: the ACF's)")
    parser.add_argument("--compiler-path", type=Path, help="ptxas or nvcc to compile with (default: found)")
    parser.add_argument(
        "--sessions", type=int, default=d.sessions, help="fresh processes per candidate (%(default)s)"
    )
    parser.add_argument(
        "--repeats", type=positive_int, default=200, help="timed rounds per session (%(default)s)"
    )
    parser.add_argument("--warmup", type=int, default=50, help="untimed rounds per session (%(default)s)")
    parser.add_argument(
        "--alpha", type=float, default=d.alpha, help="family-wise significance level (%(default)s)"
    )
    parser.add_argument(
        "--correction", choices=("holm", "bonferroni", "none"), default=d.correction, help="(%(default)s)"
    )
    parser.add_argument(
        "--min-improvement",
        type=float,
        default=d.min_improvement,
        help="minimal relative gain (%(default)s = 1%%)",
    )
    parser.add_argument(
        "--min-effect", type=float, default=d.min_effect, help="minimal Cohen's d (%(default)s)"
    )
    parser.add_argument(
        "--max-spread-increase",
        type=float,
        default=d.max_spread_increase,
        help="allowed relative widening of the p5-p95 spread (%(default)s)",
    )
    parser.add_argument(
        "--no-l2-flush", action="store_true", help="do not flush the L2 cache between launches"
    )
    parser.add_argument("--device", type=int, default=0, help="CUDA device index (%(default)s)")
    parser.add_argument(
        "--lock-clocks",
        nargs="?",
        const=0,
        type=int,
        metavar="MHZ",
        help="lock the SM clock during validation (default clock: the GPU's applications clock); needs root",
    )
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per session (%(default)s)")
    parser.add_argument("--no-record", action="store_true", help="do not write <acf>.validation.json records")


def load_launch(spec: str) -> KernelLaunch:
    """Resolve ``module:NAME`` or ``file.py:NAME`` to a :class:`KernelLaunch`.

    A file's directory is put on ``sys.path`` and the file imported by its module name, so the
    isolated evaluation process can import the same functions.
    """
    target, sep, name = spec.rpartition(":")
    if not sep or not target or not name:
        raise CiqError(f"--launch {spec!r}: expected MODULE:NAME or path/file.py:NAME")
    if target.endswith(".py"):
        path = Path(target).resolve()
        if not path.is_file():
            raise CiqError(f"--launch: file not found: {target}")
        if str(path.parent) not in sys.path:
            sys.path.insert(0, str(path.parent))
        target = path.stem
    try:
        module = importlib.import_module(target)
    except ImportError as exc:
        raise CiqError(f"--launch: cannot import {target!r}: {exc}") from None
    obj: Any = getattr(module, name, None)
    if obj is None:
        raise CiqError(f"--launch: {target} has no {name!r}")
    if callable(obj) and not isinstance(obj, KernelLaunch):
        obj = obj()
    if not isinstance(obj, KernelLaunch):
        raise CiqError(f"--launch: {spec} is a {type(obj).__name__}, not a ciq_optuna.gpu.KernelLaunch")
    return obj


def run_validate(args: argparse.Namespace) -> int:
    """Validate the ACFs; print one line per candidate. 0 when it ran, 2 on a user error."""
    quiet = getattr(args, "verbosity", 0) == QUIET
    try:
        from ciq_optuna.gpu.validate import GpuAcfMeasure

        settings = ValidationSettings(
            sessions=args.sessions,
            alpha=args.alpha,
            correction=args.correction,
            min_improvement=args.min_improvement,
            min_effect=args.min_effect,
            max_spread_increase=args.max_spread_increase,
        )
        missing = [str(p) for p in args.acfs if not p.is_file()]
        if missing:
            raise CiqError(f"ACF not found: {', '.join(missing)}")
        if is_triton_ref(args.kernel):
            from ciq_optuna.gpu.triton_runtime import TritonAcfMeasure

            measure = TritonAcfMeasure(
                load_kernel(args.kernel),
                repeats=args.repeats,
                warmup=args.warmup,
                ptxas=str(args.compiler_path) if args.compiler_path else None,
                flush_l2=not args.no_l2_flush,
                device=args.device,
                timeout=args.timeout,
            )
        elif not args.launch:
            raise CiqError("--launch MODULE:NAME is needed for a .ptx or .cu kernel")
        else:
            measure = GpuAcfMeasure(
                load_launch(args.launch),
                args.kernel,
                arch=args.arch,
                compiler_path=args.compiler_path,
                repeats=args.repeats,
                warmup=args.warmup,
                flush_l2=not args.no_l2_flush,
                device=args.device,
                timeout=args.timeout,
            )
        with contextlib.ExitStack() as stack:
            if args.lock_clocks is not None:
                from ciq_optuna.gpu.nvml import locked_clocks

                clocks = stack.enter_context(locked_clocks(args.device, sm_mhz=args.lock_clocks or None))
                if not quiet:
                    print(f"SM clock locked at {clocks['sm_mhz']} MHz", file=sys.stderr)
            report = validate_acfs(
                args.acfs,
                measure=measure,
                settings=settings,
                write_records=not args.no_record,
                progress=(lambda msg: None) if quiet else (lambda msg: print(msg, file=sys.stderr)),
            )
    except CiqError as exc:
        print(f"ciq-optuna validate: error: {exc}", file=sys.stderr)
        return EXIT_USER_ERROR
    print(report.format_table())
    print(f"{len(report.kept)} of {len(report.candidates)} kept")
    return 0
