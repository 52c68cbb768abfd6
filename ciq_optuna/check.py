"""``ciq-optuna check``: is every tuning of an ACF store still good with the installed compiler?

For each entry, with the compiler found now (``--compiler-path``, else the usual search):

1. it applies: its kernel is where the entry says and unchanged, its space file is one this
   ciq-optuna knows (by sha256), the architecture is supported and the compiler accepts the flags;
2. it reproduces the recorded binary (code hash, the command line ptxas records ignored);
3. it is no worse than the compiler defaults on its objectives: compile metrics, compiled now;
   measured (runtime) objectives timed on the GPU by the ``runtime`` check the CLI passes
   (:mod:`ciq_optuna.gpu.check`), else reported ``not checked: no GPU``, which is not stale
   unless ``require_runtime``.

Statuses: ``reproduced`` (all three hold), ``changed binary`` (applies and no worse, but the code
differs: a compiler upgrade), ``worse than default``, ``rejected`` (flags refused), ``kernel
changed`` / ``kernel missing``, ``space unknown``, ``unsupported arch``, ``damaged`` and
``duplicate`` (store problems). Everything but ``reproduced`` is stale (``changed binary`` is
not with ``allow_changed_binary``). Nothing is deleted or rewritten.
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ciq_optuna.compilers.base import Compiler, get_compiler
from ciq_optuna.errors import CiqError
from ciq_optuna.objectives.metrics import COMPILE_METRICS, compile_metrics
from ciq_optuna.space.files import available_spaces
from ciq_optuna.store import Entry, Store

REPRODUCED = "reproduced"
CHANGED = "changed binary"
WORSE = "worse than default"

#: Relative slack for noisy objectives before a tuning counts as worse than the defaults.
NOISY_METRICS = {"compile-time": 0.10}

#: How a measured (runtime) objective that could not be measured is reported.
NO_GPU = "not checked: no GPU"


@dataclass
class RuntimeVerdict:
    """The runtime comparison of a tuning with the compiler defaults (median times, ms)."""

    checked: bool
    note: str = ""
    baseline_ms: float | None = None
    tuned_ms: float | None = None
    worse: bool = False


#: ``runtime(acf_path, acf, kernel_file) -> RuntimeVerdict``: times the entry against the
#: defaults on the GPU (:func:`ciq_optuna.gpu.check.runtime_check`).
RuntimeCheck = Callable[[Path, Any, Path], RuntimeVerdict]


@dataclass
class CheckRow:
    """The verdict on one store file."""

    entry: str
    kernel: str = ""
    arch: str = ""
    tuned_with: str = ""
    installed: str = ""
    status: str = ""
    stale: bool = True
    reason: str = ""
    objectives: list[dict[str, Any]] = field(default_factory=list)

    @property
    def runtime_not_checked(self) -> bool:
        """A measured objective of this entry was not compared (no GPU, no launch recorded)."""
        return any(not o["checked"] and o.get("runtime") for o in self.objectives)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def known_space_hashes() -> set[str]:
    """sha256 of every space file this ciq-optuna has."""
    from ciq_optuna.space.compiler_space import CompilerSpace

    out = set()
    for sf in available_spaces():
        try:
            out.add(CompilerSpace.load(sf.path).sha256)
        except CiqError:
            continue
    return out


def check_store(
    store: Store,
    *,
    compiler_path: str | None = None,
    allow_changed_binary: bool = False,
    timeout: float = 120.0,
    progress: Callable[[str], None] | None = None,
    runtime: RuntimeCheck | None = None,
    require_runtime: bool = False,
) -> list[CheckRow]:
    """One :class:`CheckRow` per file of the store (see the module docstring).

    ``runtime`` times entries with a measured objective against the defaults (without it, such
    objectives are ``not checked: no GPU``); an entry whose runtime was not checked is stale
    only with ``require_runtime``.
    """
    scan = store.scan()
    rows: list[CheckRow] = []

    def rel(path: Path) -> str:
        return str(Path(path).relative_to(store.root))

    dup_paths = {e.path: es for es in scan.duplicates.values() for e in es}
    spaces = known_space_hashes()
    compilers: dict[str, Compiler] = {}
    total = len(scan.entries) + len(scan.problems)
    for i, entry in enumerate(scan.entries, 1):
        if progress:
            progress(f"[{i}/{total}] {rel(entry.path)}")
        row = _base_row(rel(entry.path), entry)
        if entry.path in dup_paths:
            others = ", ".join(rel(e.path) for e in dup_paths[entry.path] if e.path != entry.path)
            row.status, row.reason = "duplicate", f"two entries for one key (also {others})"
        else:
            try:
                _check_entry(
                    store,
                    entry,
                    _compiler_for(entry, compilers, compiler_path),
                    spaces,
                    row,
                    timeout,
                    runtime,
                )
            except CiqError as exc:
                row.status, row.reason = "error", str(exc)
        row.stale = not (row.status == REPRODUCED or (allow_changed_binary and row.status == CHANGED))
        if require_runtime and row.runtime_not_checked and not row.stale:
            row.stale, row.reason = True, row.reason + " (runtime required: --require-runtime)"
        rows.append(row)
    for p in scan.problems:
        rows.append(CheckRow(entry=rel(p.path), status="damaged", reason=p.message))
    return rows


def _base_row(name: str, entry: Entry) -> CheckRow:
    acf = entry.acf
    return CheckRow(
        entry=name,
        kernel=str(acf.kernel.get("name", "")),
        arch=acf.arch,
        tuned_with=f"{acf.compiler} {acf.compiler_version}",
    )


def _compiler_for(entry: Entry, compilers: dict[Any, Any], compiler_path: str | None) -> Any:
    """The compiler that checks ``entry`` (one per compiler name); for a Triton entry, a function
    of its kernel file that makes the Triton compiler (one per kernel and arch), as the kernel is
    checked first."""
    acf = entry.acf
    if not acf.triton:
        if acf.compiler not in compilers:
            compilers[acf.compiler] = get_compiler(acf.compiler, compiler_path)
        return compilers[acf.compiler]
    return lambda kernel: _triton_compiler(acf, kernel, compilers, compiler_path)


def _triton_compiler(acf: Any, kernel: Path, compilers: dict[Any, Any], compiler_path: str | None) -> Any:
    """The Triton compiler of a Triton entry's kernel file for its arch (Triton's ptxas or
    ``compiler_path``); CiqError when Triton is not installed or the kernel cannot be loaded."""
    from ciq_optuna.compilers.triton import load_kernel
    from ciq_optuna.objectives.triton import triton_compiler

    cache_key = (str(kernel), acf.kernel.get("name"), acf.arch)
    if cache_key not in compilers:
        tk = load_kernel(f"{kernel}:{acf.kernel.get('name')}")
        compilers[cache_key] = triton_compiler(tk, acf.arch, compiler_path)
    return compilers[cache_key]


def _check_entry(
    store: Store,
    entry: Entry,
    compiler: Any,
    spaces: set[str],
    row: CheckRow,
    timeout: float,
    runtime: RuntimeCheck | None = None,
) -> None:
    acf = entry.acf
    if not callable(getattr(compiler, "compile", None)):  # a Triton entry: its compiler needs the kernel
        row.installed = "Triton"
    else:
        row.installed = f"{compiler.name} {compiler.info.version}"
    kernel = store.kernel_path(entry)
    if kernel is None or not kernel.is_file():
        row.status = "kernel missing"
        row.reason = "the entry records no kernel path" if kernel is None else f"{kernel} not found"
        return
    if hashlib.sha256(kernel.read_bytes()).hexdigest() != entry.key.kernel_sha256:
        row.status, row.reason = "kernel changed", f"{kernel} differs from the tuned kernel: re-tune it"
        return
    unknown = [s for s in acf.space.get("spaces", []) if s.get("sha256") not in spaces]
    if unknown:
        names = ", ".join(f"{s.get('name')} {s.get('cuda')} v{s.get('version')}" for s in unknown)
        row.status, row.reason = "space unknown", f"space file {names} is not one this ciq-optuna has"
        return
    with tempfile.TemporaryDirectory(prefix="ciq-check-") as tmp:
        if acf.triton:
            pair = _compile_triton(acf, kernel, compiler, row, Path(tmp), timeout)
        else:
            pair = _compile_ptx(acf, kernel, compiler, row, Path(tmp), timeout)
        if pair is None:
            return
        tuned, base = pair
        tuned_m, base_m = compile_metrics(tuned), compile_metrics(base)
    worse = []
    verdict: RuntimeVerdict | None = None
    for o in acf.objectives:
        name, maximize = o["name"], str(o.get("direction", "minimize")).startswith("max")
        if name not in COMPILE_METRICS:
            if verdict is None:  # one timing of tuned vs defaults answers every measured objective
                verdict = runtime(entry.path, acf, kernel) if runtime else RuntimeVerdict(False, NO_GPU)
            row.objectives.append(_runtime_row(name, verdict))
            if verdict.worse:
                worse.append(_runtime_text(name, verdict))
            continue
        t, b = tuned_m[name], base_m[name]
        if t is None or b is None:
            row.objectives.append({"name": name, "checked": False, "note": "not in the compiler's report"})
            continue
        slack = NOISY_METRICS.get(name, 0.0) * abs(b)
        is_worse = t < b - slack if maximize else t > b + slack
        row.objectives.append({"name": name, "checked": True, "tuned": t, "default": b, "worse": is_worse})
        if is_worse:
            worse.append(f"{name} {t:g} vs default {b:g}")
    same = tuned.code_hash == acf.binary.get("code_sha256")
    if worse:
        row.status, row.reason = WORSE, "; ".join(worse) + (" (binary also changed)" if not same else "")
    elif same:
        row.status = REPRODUCED
        row.reason = "same code as recorded; " + _objective_text(row)
    else:
        row.status = CHANGED
        row.reason = "the compiler now makes other code; still no worse: " + _objective_text(row)


def _compile_ptx(
    acf: Any, kernel: Path, compiler: Compiler, row: CheckRow, tmp: Path, timeout: float
) -> tuple[Any, Any] | None:
    """(tuned, defaults) compiles of a PTX/CUDA entry; None with the row's status set when it fails."""
    if acf.arch not in compiler.supported_archs():
        row.status, row.reason = "unsupported arch", f"{compiler.info} does not support {acf.arch}"
        return None
    opts = tmp / "acf.opts"
    opts.write_text(acf.options_file_text(), encoding="utf-8")
    return _tuned_then_defaults(
        row,
        lambda: compiler.compile(
            kernel, acf.arch, [], output=tmp / "tuned.cubin", options_file=opts, timeout=timeout
        ),
        lambda: compiler.compile(kernel, acf.arch, [], output=tmp / "base.cubin", timeout=timeout),
        rejected="the compiler refuses the flags",
        no_baseline="the kernel does not compile with the defaults",
    )


def _tuned_then_defaults(
    row: CheckRow,
    compile_tuned: Callable[[], Any],
    compile_base: Callable[[], Any],
    *,
    rejected: str,
    no_baseline: str,
) -> tuple[Any, Any] | None:
    """Compile the tuned entry, then the defaults; on a failure set the row's status and return None."""
    tuned = compile_tuned()
    if not tuned.ok:
        row.status, row.reason = "rejected", f"{rejected}: {tuned.error}"
        return None
    base = compile_base()
    if not base.ok:
        row.status, row.reason = "error", f"{no_baseline}: {base.error}"
        return None
    return tuned, base


def _compile_triton(
    acf: Any, kernel: Path, make_compiler: Callable[[Path], Any], row: CheckRow, tmp: Path, timeout: float
) -> tuple[Any, Any] | None:
    """(tuned, defaults) compiles of a Triton entry: its meta-parameters and flags, and the kernel's
    baseline meta-parameters with no flags; None with the row's status set when it cannot be checked."""
    from ciq_optuna.compilers.triton import triton_version

    version, tuned_version = triton_version(), str(acf.triton.get("version", ""))
    row.tuned_with = f"{row.tuned_with}, Triton {tuned_version}"
    row.installed = f"Triton {version}"
    if version != tuned_version:
        row.status = "triton changed"
        row.reason = f"tuned with Triton {tuned_version}; Triton here is {version}: re-tune it"
        return None
    try:
        compiler = make_compiler(kernel)
    except CiqError as exc:
        if "ptxas" in str(exc) and acf.arch in str(exc):
            row.status, row.reason = "unsupported arch", str(exc)
        else:
            row.status, row.reason = "error", str(exc)
        return None
    row.installed = f"{compiler.name} {compiler.info.version}, Triton {version}"
    app = {**compiler.kernel.baseline_app(), **acf.application}
    return _tuned_then_defaults(
        row,
        lambda: compiler.compile(
            None, acf.arch, list(acf.flags), output=tmp / "tuned.cubin", timeout=timeout, app=app
        ),
        lambda: compiler.compile(None, acf.arch, [], output=tmp / "base.cubin", timeout=timeout),
        rejected="Triton or ptxas refuses the tuning",
        no_baseline="the kernel does not compile with its baseline",
    )


def _runtime_row(name: str, verdict: RuntimeVerdict) -> dict[str, Any]:
    row: dict[str, Any] = {"name": name, "checked": verdict.checked, "runtime": True}
    if verdict.note:
        row["note"] = verdict.note
    if verdict.tuned_ms is not None:
        row.update(tuned_ms=verdict.tuned_ms, default_ms=verdict.baseline_ms, worse=verdict.worse)
    return row


def _runtime_text(name: str, verdict: RuntimeVerdict) -> str:
    if verdict.tuned_ms is None:
        return f"{name}: {verdict.note or 'not checked'}"
    return f"{name}: runtime {verdict.tuned_ms:.4g} ms vs default {verdict.baseline_ms:.4g} ms"


def _objective_text(row: CheckRow) -> str:
    parts = []
    for o in row.objectives:
        if o.get("runtime"):
            parts.append(
                _runtime_text(
                    o["name"],
                    RuntimeVerdict(o["checked"], o.get("note", ""), o.get("default_ms"), o.get("tuned_ms")),
                )
            )
        elif o["checked"]:
            parts.append(f"{o['name']} {o['tuned']:g} vs default {o['default']:g}")
        else:
            parts.append(f"{o['name']} not checked")
    return ", ".join(parts)


def format_table(rows: list[CheckRow]) -> str:
    """A plain fixed-width table for CI logs (no colours, one row per entry)."""
    headers = ["entry", "arch", "tuned with", "installed", "status", "reason"]
    data = [
        [r.entry, r.arch, r.tuned_with, r.installed, ("STALE " if r.stale else "ok    ") + r.status, r.reason]
        for r in rows
    ]
    widths = [max(len(h), *(len(d[i]) for d in data)) if data else len(h) for i, h in enumerate(headers)]
    widths[-1] = len(headers[-1])
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    for d in data:
        lines.append("  ".join(v.ljust(w) for v, w in zip(d, widths)).rstrip())
    return "\n".join(lines)
