"""The ``ciq-optuna`` command.

Conventions shared by every subcommand: a user mistake prints one line ``ciq-optuna: error: ...``
(or the subcommand's prefix) and exits 2 (:data:`ciq_optuna.errors.EXIT_USER_ERROR`); a check whose
answer is "no" (``acf verify`` mismatch, ``spaces check`` conflicts, ``store`` problems,
``check`` regressions, failed ``tune-all`` entries) exits 1; Ctrl-C exits 130, and SIGTERM (what
``timeout``, batch schedulers and ``kill`` send) is handled the same way, exiting 143: a tune or
worker fails its in-flight trials, keeps every finished one and says how to continue. ``-q`` prints only
results and errors, ``-v`` more detail (:func:`ciq_optuna.cli.types.add_verbosity_arguments`).
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading
from collections.abc import Iterator, Sequence

from ciq_optuna import __version__
from ciq_optuna.cli.types import add_verbosity_arguments, configure_logging
from ciq_optuna.errors import EXIT_USER_ERROR, CiqError


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (the usage is one ``--help`` away)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_USER_ERROR, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The ``ciq-optuna`` parser. With ``argv``, only the command it names gets its full parser
    (the others are listed with their help line): ``--help`` and light commands then do not
    import the machinery of ``worker``, ``dashboard`` and ``validate`` (Optuna, SQLAlchemy...)."""
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
    wanted = None if argv is None else next((a for a in argv if not a.startswith("-")), "")
    _register_optional(sub, wanted)
    for leaf in _leaf_parsers(parser):
        add_verbosity_arguments(leaf)
    return parser


def _leaf_parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """The parsers of every (sub)subcommand: each gets the same ``-q/-v``."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        return [parser]
    leaves: list[argparse.ArgumentParser] = []
    for action in subs:
        for child in dict.fromkeys(action.choices.values()):
            leaves += _leaf_parsers(child)
    return leaves


#: Commands whose machinery lives in its own module: name -> (help, module, add arguments, run).
_OPTIONAL = {
    "worker": (
        "join a study and evaluate its trials (any machine with the kernel)",
        "ciq_optuna.workers",
        "add_worker_arguments",
        "run_worker_command",
    ),
    "dashboard": (
        "inspect studies live in optuna-dashboard (127.0.0.1 by default)",
        "ciq_optuna.dashboard",
        "add_dashboard_arguments",
        "run_dashboard_command",
    ),
    "validate": (
        "re-measure ACFs against the baseline on the GPU, keep significant wins",
        "ciq_optuna.gpu.cli",
        "add_validate_arguments",
        "run_validate",
    ),
}


def _register_optional(sub: argparse._SubParsersAction, wanted: str | None) -> None:
    """Commands whose machinery lives in its own module (workers, dashboard, GPU validation);
    only ``wanted`` (every one when None) is imported."""
    import importlib

    for name, (help_text, module_name, add_arguments, run) in _OPTIONAL.items():
        p = sub.add_parser(name, help=help_text)
        if wanted is None or wanted == name:
            module = importlib.import_module(module_name)
            getattr(module, add_arguments)(p)
            p.set_defaults(func=getattr(module, run))


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    configure_logging(args.verbosity, f"ciq-optuna {args.command}")
    stopped: list[int] = []
    try:
        with _sigterm_as_interrupt(stopped):
            return int(args.func(args) or 0)
    except CiqError as exc:
        print(f"ciq-optuna: error: {exc}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt as exc:  # not a mistake: a plain line, the shell's status for the signal
        detail = f": {exc}" if str(exc) else ""
        print(f"ciq-optuna: {'terminated' if stopped else 'interrupted'}{detail}", file=sys.stderr)
        return 128 + (stopped[0] if stopped else signal.SIGINT)


@contextlib.contextmanager
def _sigterm_as_interrupt(stopped: list[int]) -> Iterator[None]:
    """Within the block, SIGTERM raises KeyboardInterrupt in the main thread (noted in ``stopped``),
    so every command stops on it as on Ctrl-C; the previous handler is put back after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: object) -> None:
        if not stopped:
            stopped.append(signum)
            raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
