"""The ``ciq-optuna`` command. A user mistake prints one line ``ciq-optuna: error: ...`` and exits 2."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ciq_optuna import __version__
from ciq_optuna.errors import CiqError

EXIT_USER_ERROR = 2


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (the usage is one ``--help`` away)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_USER_ERROR, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    from ciq_optuna.cli import acf_cmd, check_cmd, explain_cmd, spaces_cmd, store_cmd, tune_all_cmd, tune_cmd

    parser = _Parser(
        prog="ciq-optuna",
        description="Tune a GPU kernel's compiler controls (ptxas, nvcc) with Optuna and write an ACF.",
    )
    parser.add_argument("--version", action="version", version=f"ciq-optuna {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    tune_cmd.register(sub)
    tune_all_cmd.register(sub)
    acf_cmd.register(sub)
    spaces_cmd.register(sub)
    store_cmd.register(sub)
    check_cmd.register(sub)
    explain_cmd.register(sub)
    _register_optional(sub)
    return parser


def _register_optional(sub: argparse._SubParsersAction) -> None:
    """Commands whose machinery lives in its own module (workers, dashboard, GPU validation)."""
    from ciq_optuna import dashboard, workers
    from ciq_optuna.gpu import cli as gpu_cli

    p = sub.add_parser("worker", help="join a study and evaluate its trials (any machine with the kernel)")
    workers.add_worker_arguments(p)
    p.set_defaults(func=workers.run_worker_command)
    p = sub.add_parser("dashboard", help="inspect studies live in optuna-dashboard (127.0.0.1 by default)")
    dashboard.add_dashboard_arguments(p)
    p.set_defaults(func=dashboard.run_dashboard_command)
    p = sub.add_parser(
        "validate", help="re-measure ACFs against the baseline on the GPU, keep significant wins"
    )
    gpu_cli.add_validate_arguments(p)
    p.set_defaults(func=gpu_cli.run_validate)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except CiqError as exc:
        print(f"ciq-optuna: error: {exc}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt as exc:  # not a mistake: a plain line, the shell's status for SIGINT
        detail = f": {exc}" if str(exc) else ""
        print(f"ciq-optuna: interrupted{detail}", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
