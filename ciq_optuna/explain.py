"""``ciq-optuna explain ACF``: what the winner changed against the compiler defaults, and which control did it.

Three views, all from real compiles of the kernel with the installed compiler:

- the ``ptxas -v`` metrics of the baseline (no flags) and of the ACF's flags, with the change;
- the SASS instruction mix by opcode class (local loads/stores, shared, global, FMA, integer
  multiply-add, branches...), from ``cuobjdump -sass`` (or ``nvdisasm``) of both cubins;
- for each control the ACF passes, its effect on each objective alone (baseline + that control)
  and what removing it from the winner costs. Values come from the study's screening and
  simplification trials when the study is reachable (``provenance`` of the ACF), else from a
  compile now (compile metrics only).

A Triton ACF is explained the same way with the Triton compiler of its kernel: the baseline is the
kernel's baseline meta-parameters with ptxas's defaults, the tuned binary its meta-parameters and
flags, and each tuned meta-parameter (``BLOCK_N``, ``num_warps``...) gets a row like a control.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ciq_optuna.acf import Acf
from ciq_optuna.compilers.base import Compiler
from ciq_optuna.compilers.locate import DEFAULT_CUDA_BIN, wheel_bin_dirs
from ciq_optuna.compilers.process import run_command
from ciq_optuna.errors import CiqError
from ciq_optuna.objectives.metrics import COMPILE_METRICS, compile_metrics
from ciq_optuna.simplify import without
from ciq_optuna.space.compiler_space import CompilerSpace
from ciq_optuna.space.files import available_spaces
from ciq_optuna.store import kernel_file
from ciq_optuna.study.metadata import file_sha256, metadata

#: Opcode classes of the SASS mix, in display order: class -> opcodes (the part before the first dot).
OPCODE_CLASSES: dict[str, tuple[str, ...]] = {
    "local load": ("LDL",),
    "local store": ("STL",),
    "shared load": ("LDS", "LDSM"),
    "shared store": ("STS",),
    "shared atomic": ("ATOMS",),
    "global load": ("LDG", "LD"),
    "global store": ("STG", "ST"),
    "global atomic": ("ATOMG", "ATOM", "RED", "REDG"),
    "async copy": ("LDGSTS", "UBLKCP", "UTMALDG", "UTMASTG"),
    "constant load": ("LDC", "ULDC"),
    "fma (float)": ("FFMA", "FFMA2", "DFMA", "HFMA2", "HFMA"),
    "imad (integer)": ("IMAD", "IMAD.WIDE"),
    "tensor core": ("HMMA", "IMMA", "DMMA", "HGMMA", "QGMMA", "IGMMA", "BGMMA"),
    "branch": ("BRA", "BRX", "JMP", "JMX", "CALL", "RET"),
    "barrier": ("BAR", "BSSY", "BSYNC", "WARPSYNC"),
}
_INSTR_RE = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?\w+\s+)?([A-Z][A-Z0-9_]*)")
_CLASS_OF = {op: cls for cls, ops in OPCODE_CLASSES.items() for op in ops}


@dataclass
class Attribution:
    """One control's share of the change: the objectives' change when it is added alone to the
    baseline (with its ``prerequisites``, the controls its conditions need, at the winner's values)
    and when it is removed from the winner."""

    control: str
    value: Any
    alone: dict[str, float | None] = field(default_factory=dict)
    removed: dict[str, float | None] = field(default_factory=dict)
    source: str = ""
    prerequisites: dict[str, Any] = field(default_factory=dict)


@dataclass
class Explanation:
    acf: Acf
    compiler: str
    metrics: dict[str, tuple[float | None, float | None]]  # name -> (baseline, tuned); None: not reported
    sass: dict[str, tuple[int, int]] | None  # class -> (baseline, tuned); None without cuobjdump
    sass_tool: str
    attributions: list[Attribution]
    notes: list[str]


def binary_tool() -> Path | None:
    """``cuobjdump`` (else ``nvdisasm``) from $CUDA_HOME, PATH, /usr/local/cuda, the pip wheels or Triton."""
    dirs = [Path(os.environ[v]) / "bin" for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]
    dirs += [Path(p) for p in os.environ.get("PATH", "").split(os.pathsep) if p]
    dirs += [DEFAULT_CUDA_BIN, *wheel_bin_dirs()]
    try:
        import triton  # noqa: F401 - Triton ships the CUDA binary tools for its own use

        dirs.append(Path(triton.__file__).parent / "backends" / "nvidia" / "bin")
    except ImportError:
        pass
    for name in ("cuobjdump", "nvdisasm"):
        for d in dirs:
            if (d / name).is_file() and os.access(d / name, os.X_OK):
                return d / name
    found = shutil.which("cuobjdump") or shutil.which("nvdisasm")
    return Path(found) if found else None


def sass_mix(cubin: Path, tool: Path) -> Counter[str]:
    """Instruction counts by opcode class (plus ``other`` and ``total``) of a cubin's SASS."""
    argv = (
        [str(tool), "-sass", str(cubin)]
        if tool.name.startswith("cuobjdump")
        else [str(tool), "-c", str(cubin)]
    )
    res = run_command(argv, timeout=120)
    if not res.ok:
        raise CiqError(f"{tool.name} failed on {cubin.name}: {(res.stderr or res.stdout).strip()[:200]}")
    counts: Counter[str] = Counter()
    for line in res.stdout.splitlines():
        m = _INSTR_RE.match(line)
        if not m:
            continue
        op = m.group(1)
        counts[_CLASS_OF.get(op, "other")] += 1
        counts["total"] += 1
    return counts


def space_of(acf: Acf) -> CompilerSpace | None:
    """The space file the ACF was tuned with (by sha256), restricted to its arch; None if unknown here."""
    wanted = {s.get("sha256") for s in acf.space.get("spaces", [])}
    for sf in available_spaces():
        try:
            space = CompilerSpace.load(sf.path)
        except CiqError:
            continue
        if space.sha256 in wanted:
            return space.for_arch(acf.arch)
    return None


def find_kernel(acf_path: Path, acf: Acf, study: Any = None) -> Path | None:
    """The kernel an ACF was tuned for, found without ``--kernel``.

    In order: ``kernel.path`` relative to a folder above the ACF (a store root); a file of the
    kernel's name beside the ACF or in the working directory; the path the ACF's study records
    (``tune`` writes the ACF with the kernel's name only, so that it names no local folder). A
    candidate found by name must have the sha256 the ACF records; where none has, the first file
    of that name is returned, so the caller reports the mismatch.
    """
    rel = acf.kernel.get("path")
    if rel:
        for parent in Path(acf_path).resolve().parents:
            if (parent / rel).is_file():
                return parent / rel
    candidates: list[Path] = []
    name = acf.kernel.get("name")
    if name:
        candidates += [Path(acf_path).resolve().parent / name, Path.cwd() / name]
    if study is not None:
        try:
            path = metadata(study).get("kernel", {}).get("path")
        except CiqError:  # not a study made by tune
            path = None
        if path:
            candidates.append(Path(path))
    existing = [c for c in candidates if kernel_file(c).is_file()]
    sha = acf.kernel.get("sha256")
    for c in existing:
        if not sha or file_sha256(kernel_file(c)) == sha:
            return c
    return existing[0] if existing else None


def explain(
    acf: Acf,
    kernel: Path,
    compiler: Compiler,
    *,
    study: Any = None,
    timeout: float = 120.0,
) -> Explanation:
    """Compile the kernel with and without the ACF's flags and attribute the change to its controls."""
    notes: list[str] = []
    if compiler.info.version != acf.compiler_version:
        notes.append(
            f"explained with {compiler.name} {compiler.info.version}; the ACF was tuned with "
            f"{acf.compiler} {acf.compiler_version}"
        )
    tool = binary_tool()
    base_app, tuned_app = _apps(acf, compiler)
    with tempfile.TemporaryDirectory(prefix="ciq-explain-") as tmp:
        base = _compile(compiler, kernel, acf.arch, [], Path(tmp) / "base.cubin", timeout, base_app)
        tuned = _compile(compiler, kernel, acf.arch, acf.flags, Path(tmp) / "tuned.cubin", timeout, tuned_app)
        bm, tm = compile_metrics(base), compile_metrics(tuned)
        metrics = {n: (bm[n], tm[n]) for n in COMPILE_METRICS}
        sass = None
        if tool is None:
            notes.append("no cuobjdump or nvdisasm found (CUDA toolkit, pip wheels or Triton): no SASS mix")
        else:
            b, t = sass_mix(base.cubin_path, tool), sass_mix(tuned.cubin_path, tool)
            sass = {c: (b.get(c, 0), t.get(c, 0)) for c in [*OPCODE_CLASSES, "other", "total"]}
        attributions = _attribute(acf, kernel, compiler, study, tm, bm, Path(tmp), timeout, notes)
    return Explanation(acf, str(compiler.info), metrics, sass, tool.name if tool else "", attributions, notes)


def _apps(acf: Acf, compiler: Any) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """(baseline, tuned) meta-parameters of a Triton ACF's kernel; (None, None) for PTX/CUDA."""
    if not acf.triton:
        return None, None
    base = dict(compiler.kernel.baseline_app())
    return base, {**base, **acf.application}


def _compile(
    compiler: Any,
    kernel: Path,
    arch: str,
    flags: list[str],
    out: Path,
    timeout: float,
    app: dict[str, Any] | None = None,
) -> Any:
    res = _compile_any(compiler, kernel, arch, flags, out, timeout, app)
    if not res.ok:
        what = " ".join(flags) or "the defaults"
        if app is not None:
            what += " and " + ", ".join(f"{k}={v!r}" for k, v in app.items())
        raise CiqError(f"{kernel.name} does not compile with {what}: {res.error}")
    return res


def _compile_any(
    compiler: Any, kernel: Path, arch: str, flags: list[str], out: Path, timeout: float, app: Any
) -> Any:
    if app is None:
        return compiler.compile(kernel, arch, flags, output=out, timeout=timeout)
    return compiler.compile(None, arch, flags, output=out, timeout=timeout, app=app)


def compiler_for_acf(acf: Acf, kernel: str | Path, compiler_path: str | None = None) -> tuple[Path, Any]:
    """(kernel file, compiler) to explain ``acf`` with: the ACF's compiler, or for a Triton ACF
    the Triton compiler of its kernel (``path.py`` or ``path.py:name``) with Triton's ptxas for
    the arch (or ``compiler_path``)."""
    from ciq_optuna.compilers.base import get_compiler

    if not acf.triton:
        return Path(kernel), get_compiler(acf.compiler, compiler_path)
    from ciq_optuna.compilers.triton import load_kernel, parse_ref, triton_version
    from ciq_optuna.objectives.triton import triton_compiler

    text = str(kernel)
    path = parse_ref(text)[0] if ":" in Path(text).name else Path(text)
    if not path.is_file():
        raise CiqError(f"kernel not found: {path}")
    version = triton_version()
    if version != acf.triton.get("version"):
        raise CiqError(
            f"this ACF was tuned with Triton {acf.triton.get('version')}; Triton here is {version}"
        )
    tk = load_kernel(f"{path}:{acf.triton.get('kernel') or acf.kernel.get('name')}")
    return path, triton_compiler(tk, acf.arch, compiler_path)


def _attribute(
    acf: Acf,
    kernel: Path,
    compiler: Compiler,
    study: Any,
    tuned: Mapping[str, float],
    base: Mapping[str, float],
    tmp: Path,
    timeout: float,
    notes: list[str],
) -> list[Attribution]:
    space = space_of(acf)
    if space is None:
        notes.append("the ACF's space file is not one this ciq-optuna has: no per-control attribution")
        return []
    winner = space.complete(acf.controls.get(space.name, {}))
    base_app, tuned_app = _apps(acf, compiler)
    by_flags = _study_values(study, base_app)
    # the two compiles already made answer the commonest questions (a control alone is the winner,
    # removing the only control gives the baseline)
    by_flags.setdefault(_key([], base_app), (dict(base), -1))
    by_flags.setdefault(_key(acf.flags, tuned_app), (dict(tuned), -2))
    objectives = [o["name"] for o in acf.objectives]
    winner_flags = space.render(winner)
    # (name, value, prerequisites, (flags, app) alone, (flags, app) removed from the winner)
    changes: list[tuple[str, Any, dict[str, Any], Any, Any]] = []
    for name, value in (tuned_app or {}).items():  # Triton meta-parameters
        if base_app is not None and base_app.get(name) != value:
            changes.append(
                (
                    name,
                    value,
                    {},
                    ([], {**base_app, name: value}),
                    (winner_flags, {**tuned_app, name: base_app[name]}),
                )
            )
    for name, value in space.passed(winner).items():
        alone_cfg, prerequisites = _alone(space, winner, name, value)
        alone = None if alone_cfg is None else (space.render(alone_cfg), base_app)
        changes.append(
            (name, value, prerequisites, alone, (space.render(without(space, winner, name)), tuned_app))
        )
    out = []
    for name, value, prerequisites, alone, removed in changes:
        a = Attribution(name, value, prerequisites=prerequisites)
        sources = set()
        for cfg, ref, target in ((alone, base, a.alone), (removed, tuned, a.removed)):
            if cfg is None:
                continue
            values, src = _values_for(cfg[0], cfg[1], by_flags, compiler, kernel, acf.arch, tmp, timeout)
            sources.add(src)
            for o in objectives:
                v = values.get(o) if values else None
                target[o] = None if v is None or ref.get(o) is None else v - ref[o]
        a.source = " + ".join(sorted(sources))
        out.append(a)
    return out


def _key(flags: Any, app: Mapping[str, Any] | None) -> tuple:
    """Lookup key of a configuration: its flags, and a Triton kernel's meta-parameters."""
    return (tuple(flags), tuple(sorted((k, repr(v)) for k, v in (app or {}).items())))


def _alone(
    space: CompilerSpace, winner: Mapping[str, Any], name: str, value: Any
) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """The baseline plus ``name=value``; when its conditions need other controls (``--override-
    directive-values`` needs ``--maxrregcount``...), those are taken at the winner's values and
    returned as the prerequisites."""
    try:
        return space.complete({name: value}), {}
    except CiqError:
        pass
    control = space.control(name)
    parents = set(control.when) | {k for cond in control.when_any for k in cond}
    extra = {p: winner[p] for p in parents if p in winner}
    try:
        return space.complete({**extra, name: value}), space.passed(extra)
    except CiqError:
        return None, {}


def _study_values(
    study: Any, base_app: Mapping[str, Any] | None = None
) -> dict[tuple, tuple[dict[str, float], int]]:
    """Metric values of the study's complete trials by their flags (and a Triton kernel's
    meta-parameters, read from the trial's parameters): screening, simplification, any."""
    if study is None:
        return {}
    import optuna

    from ciq_optuna.summary import trial_metrics

    out: dict[tuple, tuple[dict[str, float], int]] = {}
    for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)):
        app = None if base_app is None else {k: t.params.get(k, v) for k, v in base_app.items()}
        out.setdefault(_key(t.user_attrs.get("flags", []), app), (trial_metrics(t), t.number))
    return out


def _values_for(
    flags: list[str],
    app: dict[str, Any] | None,
    by_flags: Mapping[tuple, tuple[dict[str, float], int]],
    compiler: Compiler,
    kernel: Path,
    arch: str,
    tmp: Path,
    timeout: float,
) -> tuple[dict[str, float] | None, str]:
    key = _key(flags, app)
    if key in by_flags:
        values, number = by_flags[key]
        return values, f"study trial {number}" if number >= 0 else "compiled now"
    res = _compile_any(compiler, kernel, arch, flags, tmp / "attr.cubin", timeout, app)
    return (compile_metrics(res) if res.ok else None), "compiled now"


def load_study_of(acf: Acf, storage: str | None) -> tuple[Any, str]:
    """The study an ACF came from (``storage`` or the one it records), or (None, why not)."""
    import optuna

    from ciq_optuna.study.storage import sqlite_path

    prov = acf.provenance
    name, url = prov.get("study"), storage or prov.get("storage")
    if not name or not url:
        return None, "the ACF records no study"
    if "***" in url:
        return None, f"the recorded storage is redacted ({url}); pass --storage"
    db = sqlite_path(url)
    if db is not None and not db.is_file():
        return None, f"study database {db} not found here (pass --storage)"
    try:
        return optuna.load_study(study_name=name, storage=url), ""
    except Exception as exc:  # any storage problem: explain without the study
        return None, f"study {name!r} not reachable: {str(exc).splitlines()[0][:120]}"


def format_explanation(ex: Explanation) -> str:
    """Plain-text report: metrics diff, SASS mix diff, per-control attribution."""
    acf = ex.acf
    lines = [
        f"ACF for {acf.kernel.get('name', '?')} on {acf.arch}, tuned with {acf.compiler} {acf.compiler_version}",
        f"flags: {' '.join(acf.flags) or '(none: the defaults won)'}",
        *(
            [f"meta-parameters: {', '.join(f'{k}={v!r}' for k, v in acf.application.items())}"]
            if acf.triton
            else []
        ),
        f"compiled with {ex.compiler}",
        *[f"note: {n}" for n in ex.notes],
        "",
        "ptxas -v metrics (baseline = compiler defaults"
        + (", the kernel's baseline meta-parameters" if acf.triton else "")
        + "):",
        _table(
            ["metric", "baseline", "tuned", "change"],
            [
                [
                    n + (" *" if n in {o["name"] for o in acf.objectives} else ""),
                    _g(b),
                    _g(t),
                    _delta(None if b is None or t is None else t - b),
                ]
                for n, (b, t) in ex.metrics.items()
            ],
        ),
    ]
    if ex.sass is not None:
        lines += ["", f"SASS instruction mix by opcode class ({ex.sass_tool}):"]
        rows = [[c, str(b), str(t), _delta(t - b)] for c, (b, t) in ex.sass.items() if b or t]
        lines.append(_table(["class", "baseline", "tuned", "change"], rows))
    lines += [
        "",
        "each control's share (objective change when added alone to the baseline / removed from the winner):",
    ]
    if not ex.attributions:
        lines.append(
            "(no controls passed: the defaults won)" if not acf.flags else "(not available, see notes)"
        )
    else:
        objectives = [o["name"] for o in acf.objectives]
        headers = ["control", "value"]
        for o in objectives:
            headers += [f"{o} alone", f"{o} removed"]
        rows = []
        for a in ex.attributions:
            needs = ", ".join(f"{k}={v}" for k, v in a.prerequisites.items())
            row = [a.control, str(a.value) + (f" (with {needs})" if needs else "")]
            for o in objectives:
                row += [_delta(a.alone.get(o)), _delta(a.removed.get(o))]
            rows.append([*row, a.source])
        lines.append(_table([*headers, "from"], rows))
    return "\n".join(lines)


def _g(v: float | None) -> str:
    return "-" if v is None else f"{v:g}"


def _delta(v: float | None) -> str:
    if v is None:
        return "-"
    return "0" if v == 0 else f"{v:+g}"


def _table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    out = [
        "  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip(),
        "  ".join("-" * w for w in widths),
    ]
    out += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    return "\n".join("  " + line for line in out)
