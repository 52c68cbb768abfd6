"""Errors a user can fix: the CLI prints their message as one line, without a traceback."""


class CiqError(Exception):
    """An error caused by input or environment that the user can correct."""
