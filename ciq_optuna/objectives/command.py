"""Measure a binary with the user's own shell command and read a metric from its output.

The template may use ``{cubin}``, ``{kernel}``, ``{arch}``, ``{flags}`` (shell-quoted) and
application parameters as ``{app[tile][m]}``; values are shell-quoted before substitution.
The command runs in ``cwd`` (the directory ``tune`` ran in, recorded in the study, so a worker
started elsewhere runs ``./bench`` from the same place when it exists there). The metric is the
first group of a regular expression searched in stdout, else in stderr. The trial fails, never
takes a default, when the regex does not match, matches more than once (which number would be
meant?), or reads NaN, an infinity or a negative number (a time or a size is never negative).
"""

from __future__ import annotations

import math
import re
import shlex
import string
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ciq_optuna.compilers.process import run_command
from ciq_optuna.errors import CiqError
from ciq_optuna.space.search import Candidate

_FIELDS = {"cubin", "kernel", "arch", "flags", "app"}


class _Quoted(dict):
    """App parameters whose leaves come out shell-quoted."""

    def __getitem__(self, key: str) -> Any:
        value = super().__getitem__(key)
        return _Quoted(value) if isinstance(value, Mapping) else shlex.quote(str(value))


class CommandMeasure:
    """``measure(cubin, candidate)`` running a shell command template; see the module docstring."""

    def __init__(
        self,
        template: str,
        metric: str,
        regex: str,
        *,
        kernel: Path,
        arch: str,
        timeout: float = 300.0,
        cwd: Path | None = None,
    ) -> None:
        try:
            fields = {f[1].split("[")[0].split(".")[0] for f in string.Formatter().parse(template) if f[1]}
        except ValueError as exc:
            raise CiqError(f"measure command template {template!r}: {exc}") from None
        unknown = fields - _FIELDS
        if unknown:
            raise CiqError(
                f"measure command template uses unknown field(s) {sorted(unknown)}; "
                f"available: {sorted(_FIELDS)}"
            )
        try:
            self.regex = re.compile(regex)
        except re.error as exc:
            raise CiqError(f"measure regex {regex!r} is not a valid regular expression: {exc}") from None
        if self.regex.groups < 1:
            raise CiqError(
                f"measure regex {regex!r} needs one group around the number, e.g. 'time=([0-9.]+)'"
            )
        self.template, self.metric = template, metric
        self.kernel, self.arch, self.timeout = kernel, arch, timeout
        self.cwd = cwd

    def command(self, cubin: Path, candidate: Candidate) -> str:
        return self.template.format(
            cubin=shlex.quote(str(cubin)),
            kernel=shlex.quote(str(self.kernel)),
            arch=self.arch,
            flags=shlex.join(candidate.all_flags()),
            app=_Quoted(candidate.app),
        )

    def __call__(self, cubin: Path, candidate: Candidate) -> dict[str, float]:
        cmd = self.command(cubin, candidate)
        res = run_command(["/bin/sh", "-c", cmd], timeout=self.timeout, cwd=self.cwd)
        if res.timed_out:
            raise CiqError(f"measure command timed out after {self.timeout:g} s")
        if res.returncode != 0:
            last = (res.stderr or res.stdout).strip().splitlines()[-1:] or ["no output"]
            raise CiqError(f"measure command exited with {res.returncode}: {last[0][:300]}")
        for stream, text in (("stdout", res.stdout), ("stderr", res.stderr)):
            matches = self.regex.findall(text or "")
            if matches:
                return {self.metric: self._value(matches, stream)}
        raise CiqError(f"measure command output has no match for {self.regex.pattern!r}")

    def _value(self, matches: list[Any], stream: str) -> float:
        raws = [m[0] if isinstance(m, tuple) else m for m in matches]
        if len(raws) > 1:
            shown = ", ".join(repr(r) for r in raws[:4]) + (", ..." if len(raws) > 4 else "")
            raise CiqError(
                f"measure regex {self.regex.pattern!r} matched {len(raws)} times in {stream} ({shown}); "
                "make it match once"
            )
        try:
            value = float(raws[0])
        except ValueError:
            raise CiqError(f"measure regex matched {raws[0]!r}, which is not a number") from None
        if not math.isfinite(value) or value < 0:
            raise CiqError(f"measure regex matched {raws[0]!r}: not a finite, non-negative number")
        return value
