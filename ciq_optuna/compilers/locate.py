"""Find NVIDIA compilers (ptxas, nvcc) on this machine and detect their versions.

Search order, first match wins (``list_compilers`` returns them all):

1. an explicit path given by the user (the executable, or a directory holding it or ``bin/``);
2. ``$CUDA_HOME/bin`` (then ``$CUDA_PATH/bin``);
3. ``PATH``;
4. ``/usr/local/cuda/bin``;
5. pip-installed NVIDIA wheels (``nvidia-cuda-nvcc`` puts ``nvidia/cu13/bin/{ptxas,nvcc}`` in
   site-packages, with ``nvidia/cu13/nvvm`` and ``include`` beside them, so the wheel's nvcc
   finds cicc and headers through its own ``nvcc.profile``; CUDA 12 wheels used
   ``nvidia/cuda_nvcc/bin``).
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
from dataclasses import dataclass
from pathlib import Path

from ciq_optuna.compilers.process import CommandNotFoundError, run_command
from ciq_optuna.errors import CiqError

#: Compilers this module knows how to find.
COMPILER_NAMES = ("ptxas", "nvcc")

DEFAULT_CUDA_BIN = Path("/usr/local/cuda/bin")

_VERSION_RE = re.compile(r"release (\d+\.\d+), V(\d+(?:\.\d+)+)")


class CompilerNotFoundError(CiqError):
    """No usable compiler of the requested name (or release) was found."""


@dataclass(frozen=True)
class CompilerInfo:
    """One installed compiler: ``version`` is the full version ("13.0.88"), ``release`` its
    major.minor ("13.0"), the key of the matching space file."""

    name: str
    path: Path
    version: str
    release: str

    def __str__(self) -> str:
        return f"{self.name} {self.version} ({self.path})"


def _check_name(name: str) -> None:
    if name not in COMPILER_NAMES:
        raise CompilerNotFoundError(f"unknown compiler {name!r}; known: {', '.join(COMPILER_NAMES)}")


def wheel_bin_dirs() -> list[Path]:
    """``bin`` directories of NVIDIA compiler wheels installed in this Python environment."""
    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        return []
    if spec is None or not spec.submodule_search_locations:
        return []
    dirs: list[Path] = []
    for root in spec.submodule_search_locations:
        root_path = Path(root)
        for candidate in sorted(root_path.glob("cu*/bin")) + sorted(root_path.glob("cuda_nvcc/bin")):
            if candidate.is_dir():
                dirs.append(candidate)
    return dirs


def _explicit_candidates(name: str, path: str | os.PathLike) -> list[Path]:
    p = Path(path).expanduser()
    if p.is_dir():
        return [p / name, p / "bin" / name]
    return [p]


def _candidates(name: str) -> list[tuple[str, Path]]:
    """(where, path) of every place the compiler may be, in search order; may not exist."""
    out: list[tuple[str, Path]] = []
    for var in ("CUDA_HOME", "CUDA_PATH"):
        home = os.environ.get(var)
        if home:
            out.append((f"${var}/bin", Path(home) / "bin" / name))
    for entry in os.environ.get("PATH", "").split(os.pathsep):
        if entry:
            out.append(("PATH", Path(entry) / name))
    out.append((str(DEFAULT_CUDA_BIN), DEFAULT_CUDA_BIN / name))
    for d in wheel_bin_dirs():
        out.append(("pip wheel", d / name))
    return out


def _is_executable(p: Path) -> bool:
    return p.is_file() and os.access(p, os.X_OK)


@functools.lru_cache(maxsize=64)
def _version_of(path: str, mtime_ns: int) -> tuple[str, str, str]:
    """(version, release, full --version text) of the executable at ``path``."""
    try:
        res = run_command([path, "--version"], timeout=30)
    except CommandNotFoundError as exc:
        raise CompilerNotFoundError(str(exc)) from exc
    m = _VERSION_RE.search(res.stdout + res.stderr)
    if not res.ok or m is None:
        raise CompilerNotFoundError(f"{path} --version did not print a CUDA release (exit {res.returncode})")
    return m.group(2), m.group(1), res.stdout.strip()


def compiler_info(name: str, path: str | os.PathLike) -> CompilerInfo:
    """Describe the compiler executable at ``path`` (runs ``path --version``)."""
    p = Path(path).absolute()
    if not _is_executable(p):
        raise CompilerNotFoundError(f"{name} not found or not executable: {p}")
    version, release, banner = _version_of(str(p), p.stat().st_mtime_ns)
    expected = {"ptxas": "ptxas", "nvcc": "nvcc"}.get(name)
    if expected and expected not in banner.lower():
        raise CompilerNotFoundError(
            f"{p} is not {name}: its --version says {banner.strip().splitlines()[0]!r}"
        )
    return CompilerInfo(name=name, path=p, version=version, release=release)


def list_compilers(name: str) -> list[CompilerInfo]:
    """Every distinct ``name`` compiler found, in search order.

    Two paths are the same compiler when they resolve to the same file or print the same
    ``--version`` text (e.g. ``/usr/local/bin/ptxas`` as a wrapper script around the toolkit's).
    """
    _check_name(name)
    seen: set[str] = set()
    found: list[CompilerInfo] = []
    for _where, cand in _candidates(name):
        if not _is_executable(cand):
            continue
        real = str(cand.resolve())
        if real in seen:
            continue
        seen.add(real)
        try:
            info = compiler_info(name, cand)
        except CompilerNotFoundError:
            continue
        banner = _version_of(str(info.path), info.path.stat().st_mtime_ns)[2]
        if banner in seen:
            continue
        seen.add(banner)
        found.append(info)
    return found


def find_compiler(
    name: str, path: str | os.PathLike | None = None, *, release: str | None = None
) -> CompilerInfo:
    """The first ``name`` compiler in search order (see module doc), optionally of one ``release``.

    An explicit ``path`` is used as given and is an error when it is not a working compiler.
    """
    _check_name(name)
    if path is not None:
        for cand in _explicit_candidates(name, path):
            if _is_executable(cand):
                info = compiler_info(name, cand)
                if release is not None and info.release != release:
                    raise CompilerNotFoundError(f"{info} is release {info.release}, not {release}")
                return info
        raise CompilerNotFoundError(f"{name} not found at {path}")
    found = list_compilers(name)
    for info in found:
        if release is None or info.release == release:
            return info
    if found:
        have = ", ".join(f"{i.version} ({i.path})" for i in found)
        raise CompilerNotFoundError(f"no {name} of CUDA release {release} found; found: {have}")
    wheel_hint = "pip install 'ciq-optuna[cuda]'"
    raise CompilerNotFoundError(
        f"{name} not found (searched $CUDA_HOME/bin, PATH, {DEFAULT_CUDA_BIN}, NVIDIA pip wheels); "
        f"install the CUDA toolkit or {wheel_hint}, or pass its path"
    )
