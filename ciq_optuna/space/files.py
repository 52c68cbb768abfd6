"""Where compiler space files live, and which one fits an installed compiler.

Files are named ``<compiler>-<CUDA major.minor>.toml``. They are searched in the directories
of ``$CIQ_OPTUNA_SPACES`` (os.pathsep-separated), then in the copy installed with the package,
then in the repository's ``spaces/`` (editable installs).
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path

from ciq_optuna.errors import CiqError
from ciq_optuna.space.compiler_space import CompilerSpace

_log = logging.getLogger(__name__)
_FILE_RE = re.compile(r"^(?P<compiler>[a-z0-9_]+)-(?P<cuda>\d+\.\d+)\.toml$")


@dataclass(frozen=True)
class SpaceFile:
    compiler: str
    cuda: str
    path: Path


def space_dirs() -> list[Path]:
    """Directories searched for space files, first match wins."""
    dirs = [Path(p) for p in os.environ.get("CIQ_OPTUNA_SPACES", "").split(os.pathsep) if p]
    package = Path(__file__).resolve().parent.parent  # ciq_optuna/
    dirs += [package / "_spaces", package.parent / "spaces"]  # the wheel's copy, the checkout's spaces/
    return [d for d in dirs if d.is_dir()]


def available_spaces() -> list[SpaceFile]:
    """Every space file found, one per (compiler, CUDA release), sorted."""
    found: dict[tuple[str, str], SpaceFile] = {}
    for d in space_dirs():
        for path in sorted(d.glob("*.toml")):
            m = _FILE_RE.match(path.name)
            if m:
                found.setdefault((m["compiler"], m["cuda"]), SpaceFile(m["compiler"], m["cuda"], path))
    return sorted(found.values(), key=lambda f: (f.compiler, tuple(map(int, f.cuda.split(".")))))


def find_space(compiler: str, cuda: str) -> Path:
    """The space file for ``compiler`` at CUDA release ``cuda`` ("13.0").

    Without a file for that release, the nearest release of the same major version is used (the
    closest earlier one, else the closest later one), with a warning: a compiler update rarely
    drops a control, and a control it rejects fails its trials, which the samplers learn to avoid.
    CiqError listing what exists when the major version has no file at all.
    """
    release = ".".join(cuda.split(".")[:2])
    same = [f for f in available_spaces() if f.compiler == compiler]
    for f in same:
        if f.cuda == release:
            return f.path
    near = _nearest(release, [f for f in same if f.cuda.split(".")[0] == release.split(".")[0]])
    if near is not None:
        _log.warning(
            "no space file for %s %s: using %s (the nearest release that has one); to give %s %s "
            "its own, copy it to %s-%s.toml with cuda = \"%s\" and run `ciq-optuna spaces check` on it",
            compiler,
            release,
            near.path.name,
            compiler,
            release,
            compiler,
            release,
            release,
        )
        return near.path
    have = ", ".join(f"{f.compiler} {f.cuda}" for f in available_spaces()) or "none"
    raise CiqError(
        f"no search space for {compiler} {release} (available: {have}); "
        f"pass --space FILE or add spaces/{compiler}-{release}.toml"
    )


def _nearest(release: str, files: list[SpaceFile]) -> SpaceFile | None:
    """The file of the closest earlier release, else of the closest later one."""
    key = tuple(map(int, release.split(".")))
    earlier = [f for f in files if tuple(map(int, f.cuda.split("."))) < key]
    later = [f for f in files if tuple(map(int, f.cuda.split("."))) > key]
    if earlier:
        return max(earlier, key=lambda f: tuple(map(int, f.cuda.split("."))))
    if later:
        return min(later, key=lambda f: tuple(map(int, f.cuda.split("."))))
    return None


def load_space(compiler: str, cuda: str) -> CompilerSpace:
    """Load the space file matching a compiler release."""
    return CompilerSpace.load(find_space(compiler, cuda))
