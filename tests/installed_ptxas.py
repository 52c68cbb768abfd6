"""The ptxas releases installed here (CUDA 13.0 in /usr/local/cuda, 13.5 from the pip wheels), or None."""

from __future__ import annotations

from ciq_optuna.compilers.locate import CompilerInfo, find_compiler
from ciq_optuna.errors import CiqError


def find_ptxas(release: str | None = None) -> CompilerInfo | None:
    """The installed ptxas of ``release`` (e.g. "13.0"; None: the one tune would use), or None."""
    try:
        return find_compiler("ptxas", release=release)
    except CiqError:
        return None


PTXAS = find_ptxas()
PTXAS_130 = find_ptxas("13.0")
PTXAS_135 = find_ptxas("13.5")
