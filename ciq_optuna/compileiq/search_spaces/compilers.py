"""Compiler search spaces for the CompileIQ-compatible API, backed by ciq-optuna's open spaces.

``PtxasSearchSpace()`` / ``NvccSearchSpace()`` resolve (``.retrieve()``) to a
:class:`~ciq_optuna.space.compiler_space.CompilerSpace` loaded from ``spaces/<compiler>-<release>.toml``.
The objective then receives each candidate as CompileIQ passes an ACF: a hex string. Its bytes
are the text of a compiler options file; write it with
:func:`ciq_optuna.compileiq.utils.helpers.save_compiler_config` and apply it with
``ptxas --options-file FILE`` (CompileIQ: ``--apply-controls FILE``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ciq_optuna.errors import CiqError
from ciq_optuna.space.compiler_space import CompilerSpace

__all__ = ["LocalSearchSpace", "NvccSearchSpace", "PtxasSearchSpace", "SearchSpaceProvider"]


@dataclass
class SearchSpaceProvider:
    """A compiler space by compiler name and CUDA release.

    ``version``: "13.0" or a full "13.0.88" (None: the release of the compiler found on this
    machine). ``variant``/``tag`` exist for CompileIQ compatibility; only ``"default"``/``"latest"``
    are meaningful (one open space per compiler release). ``arch`` (e.g. ``"sm_90a"``), optional,
    keeps only the controls that exist for that architecture.
    """

    version: str | None = None
    variant: str = "default"
    tag: str = "latest"
    arch: str | None = None
    compiler: str = ""

    def __post_init__(self) -> None:
        if self.variant != "default":
            raise ValueError(
                f"search-space variant {self.variant!r} is not available: ciq-optuna has one open "
                f"space per compiler release (variant='default')"
            )
        self._space: CompilerSpace | None = None

    def retrieve(self) -> CompilerSpace:
        """Load the space file (once)."""
        if self._space is None:
            from ciq_optuna.space.files import find_space

            version = self.version
            if version is None:
                from ciq_optuna.compilers.locate import find_compiler

                version = find_compiler(self.compiler).release
            try:
                path = find_space(self.compiler, str(version))
            except CiqError:
                from ciq_optuna.space.files import available_spaces

                have = [f.cuda for f in available_spaces() if f.compiler == self.compiler]
                raise ValueError(
                    f"no open {self.compiler} search space for CUDA {version}: "
                    f"pass version= one of {', '.join(have) or 'none'}"
                ) from None
            space = CompilerSpace.load(path)
            self._space = space.for_arch(self.arch) if self.arch else space
        return self._space

    @property
    def metadata(self) -> dict[str, Any]:
        """What was resolved: compiler, release, file, sha256, architecture."""
        space = self.retrieve()
        return {
            "compiler": space.compiler,
            "cuda": space.cuda,
            "space_version": space.version,
            "path": str(space.path) if space.path else None,
            "sha256": space.sha256,
            "arch": self.arch,
        }


@dataclass
class PtxasSearchSpace(SearchSpaceProvider):
    """ptxas controls (apply with ``ptxas --options-file F`` or ``nvcc -Xptxas --options-file=F``)."""

    compiler: str = "ptxas"


@dataclass
class NvccSearchSpace(SearchSpaceProvider):
    """nvcc controls (apply with ``nvcc --options-file F``)."""

    compiler: str = "nvcc"


class LocalSearchSpace:
    """A space file given by path (``spaces/*.toml`` format)."""

    def __init__(self, path: str | Path, arch: str | None = None) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(f"search space file not found: {self.path}")
        self.arch = arch

    def retrieve(self) -> CompilerSpace:
        """Load the file."""
        space = CompilerSpace.load(self.path)
        return space.for_arch(self.arch) if self.arch else space
