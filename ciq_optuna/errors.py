"""Errors a user can fix: the CLI prints their message as one line, without a traceback."""

from pathlib import Path

#: Exit status of every ``ciq-optuna`` subcommand for a CiqError (argparse uses it too).
EXIT_USER_ERROR = 2


class CiqError(Exception):
    """An error caused by input or environment that the user can correct."""


def read_text(path: str | Path, what: str) -> str:
    """The UTF-8 text of a user-given file; CiqError naming ``what`` it is if it cannot be read."""
    path = Path(path)
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CiqError(f"{what} not found: {path}") from None
    except IsADirectoryError:
        raise CiqError(f"{what} {path} is a directory, not a file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CiqError(f"cannot read {what} {path}: {exc}") from None


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during work that saved what it had; the CLI prints ``interrupted: MESSAGE`` and exits 130."""
