"""Make a candidate's ptxas controls reach Triton's compiler, and prove that they did.

Triton compiles PTX with ptxas found through ``TRITON_PTXAS_PATH``. :class:`PtxasInjection`
points that variable at a small POSIX shell wrapper that appends the flags listed (one per line)
in ``$CIQ_PTXAS_FLAGS_FILE`` after Triton's own arguments (ptxas keeps the last value of a
repeated option, so the candidate's value wins) and logs every call to ``$CIQ_PTXAS_LOG``.
``--version``/``--help`` calls pass through untouched, since Triton derives its PTX version from
them. Triton caches compiled kernels on disk and in memory; :meth:`PtxasInjection.use` therefore
sets ``TRITON_ALWAYS_COMPILE=1`` and a fresh ``TRITON_CACHE_DIR`` for every candidate, and a
kernel must be re-wrapped (a new ``triton.jit`` object) to leave the in-memory cache.
:meth:`PtxasInjection.check_reached` verifies from the log that ptxas really ran with the flags.
"""

from __future__ import annotations

import os
import shlex
import tempfile
from collections.abc import MutableMapping, Sequence
from pathlib import Path

from ciq_optuna.errors import CiqError
from ciq_optuna.gpu.errors import MeasurementError

#: Marks the start of one ptxas call in the log file.
CALL_MARK = "--- ciq-ptxas-call"

_WRAPPER = """#!/bin/sh
# ciq-optuna ptxas wrapper: runs the real ptxas with the flags listed one per line in
# $CIQ_PTXAS_FLAGS_FILE appended to the caller's arguments, and logs each call to $CIQ_PTXAS_LOG.
REAL={real}
for a in "$@"; do
  case "$a" in --version|-V|--help|-h) exec "$REAL" "$@";; esac
done
if [ -n "${{CIQ_PTXAS_FLAGS_FILE:-}}" ] && [ -f "$CIQ_PTXAS_FLAGS_FILE" ]; then
  while IFS= read -r flag || [ -n "$flag" ]; do
    if [ -n "$flag" ]; then set -- "$@" "$flag"; fi
  done < "$CIQ_PTXAS_FLAGS_FILE"
fi
if [ -n "${{CIQ_PTXAS_LOG:-}}" ]; then
  {{ printf '%s\\n' "{mark}"; for a in "$@"; do printf '%s\\n' "$a"; done; }} >> "$CIQ_PTXAS_LOG"
fi
exec "$REAL" "$@"
"""


def write_ptxas_wrapper(directory: str | os.PathLike, real_ptxas: str | os.PathLike) -> Path:
    """Write the executable wrapper script ``directory/ptxas`` around ``real_ptxas``."""
    real = Path(real_ptxas).resolve()
    if not (real.is_file() and os.access(real, os.X_OK)):
        raise CiqError(f"ptxas not found or not executable: {real_ptxas}")
    path = Path(directory) / "ptxas"
    path.write_text(_WRAPPER.format(real=shlex.quote(str(real)), mark=CALL_MARK), encoding="utf-8")
    path.chmod(0o755)
    return path


class PtxasInjection:
    """Wrapper, flags file, call log and per-candidate Triton cache directories in ``workdir``.

    Example::

        inj = PtxasInjection(find_compiler("ptxas").path)
        inj.use(["-O3", "--maxrregcount=128"])   # before compiling the candidate
        kernel = triton.jit(matmul_kernel_fn)    # a fresh JIT object: no in-memory cache hit
        kernel[grid](...)                        # Triton runs the wrapper -> real ptxas + flags
        inj.check_reached(["-O3", "--maxrregcount=128"])
    """

    def __init__(self, real_ptxas: str | os.PathLike, workdir: str | os.PathLike | None = None) -> None:
        self.workdir = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="ciq-triton-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.real_ptxas = Path(real_ptxas)
        self.wrapper = write_ptxas_wrapper(self.workdir, real_ptxas)
        self.flags_file = self.workdir / "flags.txt"
        self.log_file = self.workdir / "ptxas-calls.log"
        self.flags_file.write_text("", encoding="utf-8")
        self._generation = 0

    def use(self, flags: Sequence[str], env: MutableMapping[str, str] | None = None) -> Path:
        """Route the next compiles through the wrapper with ``flags``; returns the fresh cache dir.

        Sets (in ``env``, default ``os.environ``) ``TRITON_PTXAS_PATH`` (and the Blackwell
        variant), ``TRITON_ALWAYS_COMPILE=1``, a new ``TRITON_CACHE_DIR``, and the wrapper's
        ``CIQ_PTXAS_FLAGS_FILE`` / ``CIQ_PTXAS_LOG``.
        """
        bad = [f for f in flags if "\n" in f or "\r" in f or not f]
        if bad:
            raise CiqError(f"ptxas flags must be non-empty single-line strings, got {bad!r}")
        env = os.environ if env is None else env
        self.flags_file.write_text("".join(f + "\n" for f in flags), encoding="utf-8")
        self._generation += 1
        cache = self.workdir / f"cache-{self._generation}"
        cache.mkdir(parents=True, exist_ok=False)
        env["TRITON_PTXAS_PATH"] = str(self.wrapper)
        env["TRITON_PTXAS_BLACKWELL_PATH"] = str(self.wrapper)
        env["TRITON_ALWAYS_COMPILE"] = "1"
        env["TRITON_CACHE_DIR"] = str(cache)
        env["CIQ_PTXAS_FLAGS_FILE"] = str(self.flags_file)
        env["CIQ_PTXAS_LOG"] = str(self.log_file)
        return cache

    def calls(self) -> list[list[str]]:
        """Arguments of every logged ptxas compile (candidate flags appended), oldest first."""
        if not self.log_file.is_file():
            return []
        out: list[list[str]] = []
        for line in self.log_file.read_text(encoding="utf-8").splitlines():
            if line == CALL_MARK:
                out.append([])
            elif out:
                out[-1].append(line)
        return out

    def check_reached(self, flags: Sequence[str], since: int = 0) -> list[str]:
        """The last compile after call number ``since``; :class:`MeasurementError` unless it ended
        with ``flags`` (i.e. Triton really recompiled and ptxas received the controls)."""
        calls = self.calls()[since:]
        if not calls:
            raise MeasurementError(
                "ptxas was not called: Triton reused a cached kernel (new triton.jit object, "
                "TRITON_ALWAYS_COMPILE=1 and a fresh TRITON_CACHE_DIR are needed)"
            )
        last = calls[-1]
        n = len(flags)
        if n and last[-n:] != list(flags):
            raise MeasurementError(
                f"ptxas ran without the candidate's flags {list(flags)}: {shlex.join(last)}"
            )
        return last
