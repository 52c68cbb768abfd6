"""The ACF store: tuned controls for a repository of kernels, keyed by code × arch × compiler.

A store is a plain directory of ACF files, committable next to the kernels::

    STORE/<kernel stem>/<arch>/<compiler>-<version>/<kernel sha256[:12]>[.<variant>].<objectives>.acf

The path is only a convention for people browsing the store; the key of an entry is read from
the ACF itself (:class:`StoreKey`): the sha256 of the kernel's content, the architecture, the
compiler's name and full version, the objectives (``min-registers``) and a front-end
``variant`` (empty for PTX and CUDA; a Triton front end records its version and fixed
meta-parameters there). :func:`lookup` only returns an entry whose key matches exactly, so a
tuning is never applied to other code or with another compiler: anything else is "none: use the
compiler defaults".

An entry also records where its kernel is (``kernel.path``, relative to the store root), so
``ciq-optuna check`` can recompile it.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ciq_optuna.acf import Acf, read_acf, write_acf
from ciq_optuna.errors import CiqError

_log = logging.getLogger("ciq_optuna")

#: Environment variable naming the default store of :func:`lookup`.
STORE_ENV = "CIQ_OPTUNA_STORE"


class StoreError(CiqError):
    """A store problem the user must fix (missing store, two entries for one key, refused overwrite)."""


@dataclass(frozen=True)
class StoreKey:
    """What a tuning is valid for. Two entries with the same key are a conflict."""

    kernel_sha256: str
    arch: str
    compiler: str
    compiler_version: str
    objectives: tuple[str, ...]
    variant: str = ""

    @classmethod
    def of(cls, acf: Acf) -> StoreKey:
        """The key an ACF is valid for."""
        sha = acf.kernel.get("sha256")
        if not sha:
            raise CiqError("the ACF records no kernel sha256, so it cannot be keyed in a store")
        return cls(
            kernel_sha256=str(sha),
            arch=acf.arch,
            compiler=acf.compiler,
            compiler_version=acf.compiler_version,
            objectives=objective_names(acf.objectives),
            variant=str(acf.kernel.get("variant", "")),
        )

    def describe(self) -> str:
        """One readable line: kernel hash, arch, compiler, objectives (and variant)."""
        variant = f", {self.variant}" if self.variant else ""
        return (
            f"kernel {self.kernel_sha256[:12]}, {self.arch}, {self.compiler} {self.compiler_version}, "
            f"{'+'.join(self.objectives)}{variant}"
        )


def objective_names(objectives: Iterable[Mapping[str, Any]]) -> tuple[str, ...]:
    """``min-registers`` / ``max-measured`` for each objective of an ACF, in order."""
    out = []
    for o in objectives:
        direction = "max" if str(o.get("direction", "minimize")).startswith("max") else "min"
        out.append(f"{direction}-{o['name']}")
    return tuple(out)


@dataclass
class Entry:
    """One ACF of the store."""

    path: Path
    acf: Acf
    key: StoreKey


@dataclass
class Problem:
    """A file of the store that cannot be used, with the reason (one line)."""

    path: Path
    message: str


@dataclass
class Scan:
    """Every entry of a store, the unreadable files, and the keys held by more than one file."""

    entries: list[Entry] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    @property
    def duplicates(self) -> dict[StoreKey, list[Entry]]:
        by_key: dict[StoreKey, list[Entry]] = {}
        for e in self.entries:
            by_key.setdefault(e.key, []).append(e)
        return {k: v for k, v in by_key.items() if len(v) > 1}


@dataclass
class Tuning:
    """What :func:`lookup` found: the flags to pass, and the ACF they come from."""

    flags: list[str]
    path: Path
    acf: Acf

    @property
    def application(self) -> dict[str, Any]:
        """Tuned application (e.g. Triton meta-) parameters, empty for compiler-only tunings."""
        return dict(self.acf.application)

    @property
    def triton(self) -> dict[str, Any]:
        """A Triton kernel's config as tuned, empty for PTX/CUDA: ``constexprs`` (block sizes...),
        ``options`` (``num_warps``, ``num_stages``...) and ``ptx_options`` (the flags as one string);
        ``ciq_optuna.triton_acf.triton_config(tuning.acf)`` makes the ``triton.Config``."""
        t = self.acf.triton
        if not t:
            return {}
        return {
            "constexprs": dict(t.get("constexprs", {})),
            "options": dict(t.get("options", {})),
            "ptx_options": str(t.get("ptx_options", "")),
        }


class Store:
    """A directory of ACFs (see the module docstring)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def __repr__(self) -> str:
        return f"Store({str(self.root)!r})"

    def check_exists(self) -> None:
        if not self.root.exists():
            raise StoreError(f"store not found: {self.root}")
        if not self.root.is_dir():
            raise StoreError(f"store {self.root} is a file, not a directory")

    def files(self) -> list[Path]:
        """Every ``*.acf`` file under the root, sorted."""
        self.check_exists()
        return sorted(p for p in self.root.rglob("*.acf") if p.is_file())

    def scan(self) -> Scan:
        """Read every entry; a damaged or key-less file becomes a :class:`Problem`, never an exception."""
        scan = Scan()
        for path in self.files():
            try:
                acf = read_acf(path)
                scan.entries.append(Entry(path, acf, StoreKey.of(acf)))
            except CiqError as exc:
                scan.problems.append(Problem(path, str(exc)))
        return scan

    def path_for(self, acf: Acf) -> Path:
        """Where an ACF goes by the layout convention."""
        key = StoreKey.of(acf)
        stem = kernel_stem(str(acf.kernel.get("name", "kernel")), acf.arch)
        variant = f".{_digest(key.variant)}" if key.variant else ""
        name = f"{key.kernel_sha256[:12]}{variant}.{'+'.join(key.objectives)}.acf"
        return (
            self.root / _safe(stem) / _safe(acf.arch) / _safe(f"{acf.compiler}-{acf.compiler_version}") / name
        )

    def find(self, key: StoreKey, scan: Scan | None = None) -> Entry | None:
        """The entry for ``key``, None if there is none; StoreError if two files hold it."""
        scan = scan or self.scan()
        found = [e for e in scan.entries if e.key == key]
        if len(found) > 1:
            raise StoreError(duplicate_message(key, found))
        return found[0] if found else None

    def check_can_add(self, key: StoreKey, *, force: bool = False) -> Entry | None:
        """StoreError if an entry for ``key`` exists and ``force`` is not set; the existing entry otherwise."""
        if not self.root.exists():
            return None
        existing = self.find(key)
        if existing is not None and not force:
            raise StoreError(
                f"the store already holds a tuning for {key.describe()}: {existing.path} "
                "(pass --force to replace it)"
            )
        return existing

    def add(
        self,
        acf: Acf,
        *,
        kernel: str | Path | None = None,
        force: bool = False,
        launch: str | None = None,
    ) -> Path:
        """Write ``acf`` into the store; returns its path.

        ``kernel`` (the kernel file) is recorded relative to the store root so ``check`` can
        recompile it; its content must be the one the ACF was tuned for. ``launch``
        (``FILE.py:NAME``, a ``KernelLaunch`` or a function returning one) is recorded the same
        way, so ``check`` can time a runtime objective on a GPU. An existing entry for the same
        key is replaced only with ``force`` (its file is removed if its path differs).
        """
        key = StoreKey.of(acf)
        if launch is not None:
            file, sep, name = launch.rpartition(":")
            if not sep or not file.endswith(".py") or not name.isidentifier():
                raise StoreError(f"--launch {launch!r}: expected FILE.py:NAME")
            if not Path(file).is_file():
                raise StoreError(f"--launch: file not found: {file}")
            rel = Path(os.path.relpath(Path(file).resolve(), self.root.resolve())).as_posix()
            acf.kernel = dict(acf.kernel, launch=f"{rel}:{name}")
        if kernel is not None:
            kernel = kernel_file(kernel)
            if _file_sha256(kernel) != key.kernel_sha256:
                raise StoreError(f"{kernel} is not the kernel this ACF was tuned for (sha256 differs)")
            acf.kernel = dict(
                acf.kernel, path=Path(os.path.relpath(kernel.resolve(), self.root.resolve())).as_posix()
            )
        if self.root.exists() and not self.root.is_dir():
            raise StoreError(f"store {self.root} is a file, not a directory")
        existing = self.check_can_add(key, force=force)
        target = self.path_for(acf)
        if target.exists() and (existing is None or existing.path != target):
            if not force:
                raise StoreError(f"{target} exists and holds another tuning (pass --force to replace it)")
        path = write_acf(target, acf)
        if existing is not None and existing.path.resolve() != path.resolve():
            existing.path.unlink()
        return path

    def kernel_path(self, entry: Entry) -> Path | None:
        """The kernel file an entry records (relative to the store root), or None."""
        rel = entry.acf.kernel.get("path")
        return (self.root / rel) if rel else None


def duplicate_message(key: StoreKey, entries: Sequence[Entry]) -> str:
    paths = ", ".join(str(e.path) for e in entries)
    return f"two entries for one key ({key.describe()}): {paths}; keep one"


def kernel_file(kernel: str | Path) -> Path:
    """The file of a kernel: ``path.py`` for a Triton kernel named ``path.py:name``, else the path."""
    from ciq_optuna.compilers.triton import is_triton_ref, parse_ref

    if is_triton_ref(kernel) and ":" in str(kernel):
        return parse_ref(kernel)[0]
    return Path(kernel)


def kernel_stem(name: str, arch: str) -> str:
    """``gemm.sm_90a.ptx`` -> ``gemm``."""
    return Path(name).stem.removesuffix(f".{arch}")


def _safe(part: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.+=-]", "_", part).lstrip(".") or "_"


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def _file_sha256(path: Path) -> str:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except FileNotFoundError:
        raise CiqError(f"kernel not found: {path}") from None
    except OSError as exc:
        raise CiqError(f"cannot read kernel {path}: {exc.strerror}") from None


def _installed(kernel_name: str, compiler: Any) -> tuple[str, str]:
    """(name, full version) of the compiler a lookup is for."""
    from ciq_optuna.compilers.base import Compiler, compiler_for_source, get_compiler
    from ciq_optuna.compilers.locate import CompilerInfo

    if isinstance(compiler, Compiler):
        return compiler.name, compiler.info.version
    if isinstance(compiler, CompilerInfo):
        return compiler.name, compiler.version
    if isinstance(compiler, tuple) and len(compiler) == 2:
        return str(compiler[0]), str(compiler[1])
    if isinstance(compiler, str) and " " in compiler.strip():
        name, version = compiler.split(None, 1)
        return name, version.strip()
    if isinstance(compiler, str):
        c = get_compiler(compiler)
        return c.name, c.info.version
    if compiler is None:
        c = compiler_for_source(kernel_name)
        return c.name, c.info.version
    raise CiqError(f"compiler must be a name, 'name version', a Compiler or CompilerInfo, not {compiler!r}")


def lookup(
    kernel: str | Path | bytes,
    arch: str,
    compiler: Any = None,
    *,
    store: str | Path | Store | None = None,
    objective: str | Sequence[str] | None = None,
    variant: str | None = None,
) -> Tuning | None:
    """The tuned flags for ``kernel`` on ``arch`` with ``compiler``, or None: use the compiler defaults.

    ``kernel`` is the kernel file (or its content as bytes, then ``compiler`` must name the
    compiler). ``compiler`` is ``"ptxas 13.0.88"``, ``("ptxas", "13.0.88")``, a
    :class:`~ciq_optuna.compilers.base.Compiler` or ``CompilerInfo``, a name (the installed
    one is located), or None (the compiler for the kernel's suffix, located). ``store`` defaults
    to ``$CIQ_OPTUNA_STORE``. ``objective`` (``"registers"``, ``"min-registers"``, or a
    list) picks among tunings of the same kernel for different objectives; without it there
    must be at most one. Only an exact match counts: another kernel version, architecture,
    compiler version or variant gives None. Damaged files are skipped with a warning; two
    entries for the requested key raise StoreError.

    A Triton kernel is named ``path.py:kernel_name`` (its file is imported): the variant is the
    installed Triton's version, the kernel name and its fixed meta-parameters, and the compiler
    (None or ``"ptxas"``) is the ptxas Triton runs for ``arch``; the :class:`Tuning` then
    carries the Triton config too (``tuning.triton``, ``tuning.application``).
    """
    from ciq_optuna.compilers.triton import is_triton_ref

    if not isinstance(kernel, bytes) and is_triton_ref(kernel):
        sha, name, comp_name, comp_version, triton_variant = _triton_lookup_key(kernel, arch, compiler)
        variant = triton_variant if variant is None else variant
    elif isinstance(kernel, bytes):
        if compiler is None or (isinstance(compiler, str) and " " not in compiler.strip()):
            raise CiqError("lookup of kernel bytes needs the compiler as 'name version'")
        sha, name = hashlib.sha256(kernel).hexdigest(), "kernel"
        comp_name, comp_version = _installed(name, compiler)
    else:
        sha, name = _file_sha256(Path(kernel)), Path(kernel).name
        comp_name, comp_version = _installed(name, compiler)
    variant = variant or ""
    if store is None:
        env = os.environ.get(STORE_ENV)
        if not env:
            raise StoreError(f"no store given: pass store=... or set ${STORE_ENV}")
        store = env
    st = store if isinstance(store, Store) else Store(store)
    scan = st.scan()
    for p in scan.problems:
        _log.warning("skipping store entry %s: %s", p.path, p.message)
    wanted = _objective_filter(objective)
    found = [
        e
        for e in scan.entries
        if e.key.kernel_sha256 == sha
        and e.key.arch == arch
        and e.key.compiler == comp_name
        and e.key.compiler_version == comp_version
        and e.key.variant == variant
        and (wanted is None or _matches(e.key.objectives, wanted))
    ]
    keys = {e.key for e in found}
    if len(found) > len(keys):
        dup = next(k for k in keys if sum(e.key == k for e in found) > 1)
        raise StoreError(duplicate_message(dup, [e for e in found if e.key == dup]))
    if len(found) > 1:
        choices = ", ".join("+".join(e.key.objectives) for e in found)
        raise StoreError(f"the store holds tunings for several objectives ({choices}); pass objective=...")
    if not found:
        return None
    return Tuning(flags=list(found[0].acf.flags), path=found[0].path, acf=found[0].acf)


def _triton_lookup_key(kernel: str | Path, arch: str, compiler: Any) -> tuple[str, str, str, str, str]:
    """(file sha256, kernel name, compiler name, version, variant) of a Triton kernel as installed here."""
    from ciq_optuna.compilers.triton import load_kernel, store_variant, triton_ptxas, triton_version

    tk = load_kernel(kernel)
    if compiler is None or compiler == "ptxas":
        info = triton_ptxas(arch)
        comp_name, comp_version = "ptxas", info.version
    else:
        comp_name, comp_version = _installed(tk.name, compiler)
    return tk.file_sha256, tk.name, comp_name, comp_version, store_variant(tk, triton_version())


def _objective_filter(objective: str | Sequence[str] | None) -> tuple[str, ...] | None:
    if objective is None:
        return None
    items = [objective] if isinstance(objective, str) else list(objective)
    return tuple(items)


def _matches(have: tuple[str, ...], wanted: tuple[str, ...]) -> bool:
    if len(have) != len(wanted):
        return False
    return all(h == w or h.split("-", 1)[1] == w for h, w in zip(have, wanted))


def key_for_meta(meta: Mapping[str, Any]) -> StoreKey:
    """The store key of a tuning study's result, from its metadata."""
    objectives = [{"name": n, "direction": d} for n, d in zip(meta["metrics"], meta["directions"])]
    return StoreKey(
        kernel_sha256=meta["kernel"]["sha256"],
        arch=meta["arch"],
        compiler=meta["compiler"]["name"],
        compiler_version=meta["compiler"]["version"],
        objectives=objective_names(objectives),
        variant=str(meta["kernel"].get("variant", "")),
    )


def check_store(config: Any, meta: Mapping[str, Any]) -> StoreKey | None:
    """For ``tune --store``: the key the result will have; StoreError now (before any trial) if it
    cannot be written: several objectives, or an entry already there without ``--force``."""
    pick = getattr(config, "pareto_pick", None)
    if getattr(config, "store", None) is None:
        if pick is not None:
            raise StoreError("--pareto-pick chooses the point --store writes; give --store DIR too")
        return None
    if len(meta["metrics"]) > 1 and pick is None:
        raise StoreError(
            "--store with several objectives needs --pareto-pick: 'first' (the front's first point, "
            "best on the first objective, as in the tune summary) or a trial number"
        )
    if pick is not None:
        if len(meta["metrics"]) == 1:
            raise StoreError("--pareto-pick is for several objectives; with one, --store writes the winner")
        if pick != "first" and not pick.isdigit():
            raise StoreError(f"--pareto-pick takes 'first' or a trial number, not {pick!r}")
    st = Store(config.store)
    if st.root.exists() and not st.root.is_dir():
        raise StoreError(f"store {st.root} is a file, not a directory")
    key = key_for_meta(meta)
    st.check_can_add(key, force=config.force)
    return key


def picked_acf(config: Any, best: Sequence[Any], acf_paths: Sequence[Path]) -> Path:
    """The ACF ``tune --store`` writes: the winner, or with several objectives the Pareto point
    ``--pareto-pick`` names (``first``: the front's first point, as tune orders and prints it;
    ``N``: trial N, which must be on the front). ``best`` and ``acf_paths`` are in the same order."""
    pick = getattr(config, "pareto_pick", None)
    if pick is None or pick == "first":
        return acf_paths[0]
    for trial, path in zip(best, acf_paths):
        if trial.number == int(pick):
            return path
    points = ", ".join(str(t.number) for t in best)
    raise StoreError(
        f"trial {pick} is not on the Pareto front (its points are trials {points}); nothing stored: "
        f"the study is saved; add a point's ACF with 'ciq-optuna store add'"
    )


def add_to_store(config: Any, acf_path: Path) -> Path:
    """For ``tune --store``: copy the tune's ACF into the store, recording where the kernel is."""
    return Store(config.store).add(read_acf(acf_path), kernel=config.kernel, force=config.force)
