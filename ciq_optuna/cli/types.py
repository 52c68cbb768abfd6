"""argparse types that reject impossible numbers at the command line, with argparse's usual message;
the ``-q/-v`` options every subcommand shares and the logging they set."""

from __future__ import annotations

import argparse
import math


def positive_int(text: str) -> int:
    """An integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def positive_float(text: str) -> float:
    """A finite number > 0 (seconds, for example)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be a positive number, not {text}")
    return value


def port(text: str) -> int:
    """A TCP port, 1..65535."""
    value = positive_int(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"a port is at most 65535, not {value}")
    return value


#: Verbosity of every subcommand: ``-q`` (results and errors only), the default, ``-v`` (more).
QUIET, NORMAL, VERBOSE = -1, 0, 1


def add_verbosity_arguments(parser: argparse.ArgumentParser) -> None:
    """``-q/--quiet`` and ``-v/--verbose``, the same on every subcommand (``args.verbosity``)."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "-q",
        "--quiet",
        dest="verbosity",
        action="store_const",
        const=QUIET,
        help="only results and errors (no progress bar, notes or warnings)",
    )
    group.add_argument(
        "-v",
        "--verbose",
        dest="verbosity",
        action="store_const",
        const=VERBOSE,
        help="more detail: debug messages, and Optuna's line per trial where trials run",
    )
    parser.set_defaults(verbosity=NORMAL)


def configure_logging(verbosity: int, prefix: str) -> None:
    """Log lines ``PREFIX: message`` on stderr: warnings by default, errors only with ``-q``,
    debug messages with ``-v``. Optuna's own log (a line per trial) is set here when Optuna is
    loaded (with ``-v`` it is loaded for that); commands that run trials set it again from
    ``verbosity`` (``tune``'s ``TuneConfig.log_trials``, the worker)."""
    import logging
    import sys
    import warnings

    level = {QUIET: logging.ERROR, NORMAL: logging.WARNING, VERBOSE: logging.DEBUG}[verbosity]
    logging.basicConfig(level=level, format=f"{prefix}: %(message)s")  # no-op where a handler exists
    logging.getLogger().setLevel(level)
    if verbosity == QUIET:
        warnings.simplefilter("ignore")
    if verbosity == VERBOSE or "optuna" in sys.modules:
        import optuna

        optuna.logging.set_verbosity(level if verbosity != VERBOSE else logging.INFO)


def trial_log_level(verbosity: int) -> int:
    """Optuna's log level where trials run: its line per trial only with ``-v`` (otherwise a
    failed trial is its ``error`` attribute and the summary, not a traceback on the console)."""
    import logging

    return logging.INFO if verbosity == VERBOSE else logging.ERROR
