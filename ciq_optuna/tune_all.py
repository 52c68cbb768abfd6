"""``ciq-optuna tune-all MANIFEST``: tune a repository's kernels × archs × objectives into one store.

The manifest is TOML; paths are relative to the manifest's directory::

    store = "acf-store"            # where the winners go (required here or as --store)
    trials = 32                    # default budget per tuning
    # storage = "postgresql://..."  optional; default as for tune (so workers can join)

    [[kernel]]
    path = "stencil/stencil.{arch}.ptx"   # {arch} is replaced (PTX is per architecture);
                                          # a Triton kernel: "triton/rmsnorm.py:rmsnorm_kernel"
    archs = ["sm_80", "sm_90a"]
    minimize = ["registers"]              # one objective per tuning (a store key); or maximize
    trials = 48                           # optional, overrides the default

Every job is checked before the first trial (kernel found, architecture known to the compiler,
metric known). A job whose store entry already exists for the installed compiler is skipped;
the others run (or resume: each job is an ordinary tune study) one after the other.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ciq_optuna.compilers.base import compiler_for_source
from ciq_optuna.compilers.triton import is_triton_ref
from ciq_optuna.errors import CiqError, read_text
from ciq_optuna.objectives.metrics import check_metric_names
from ciq_optuna.store import Store, StoreKey, objective_names
from ciq_optuna.study.metadata import file_sha256

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

_TOP_KEYS = {"store", "trials", "storage", "seed", "kernel"}
_KERNEL_KEYS = {"path", "archs", "minimize", "maximize", "trials"}


@dataclass
class Job:
    """One tuning of the manifest: a kernel file, an architecture, one objective."""

    kernel: Path
    arch: str
    minimize: list[str] = field(default_factory=list)
    maximize: list[str] = field(default_factory=list)
    trials: int = 32

    @property
    def objective(self) -> str:
        return "+".join(self.minimize + self.maximize)


@dataclass
class Manifest:
    store: Path | None
    storage: str | None
    seed: int | None
    jobs: list[Job]


@dataclass
class JobResult:
    job: Job
    status: str  # "tuned", "in store", "failed"
    entry: Path | None = None
    detail: str = ""
    values: dict[str, Any] = field(default_factory=dict)


def load_manifest(path: str | Path) -> Manifest:
    """Parse and expand a manifest; CiqError (one line) for any malformed part."""
    path = Path(path)
    try:
        doc = tomllib.loads(read_text(path, "manifest"))
    except tomllib.TOMLDecodeError as exc:
        raise CiqError(f"manifest {path} is not valid TOML: {exc}") from None
    base = path.parent
    unknown = set(doc) - _TOP_KEYS
    if unknown:
        raise CiqError(
            f"manifest {path}: unknown key {sorted(unknown)[0]!r} (known: {', '.join(sorted(_TOP_KEYS))})"
        )
    trials = _positive(doc.get("trials", 32), f"manifest {path}: trials")
    kernels = doc.get("kernel")
    if not isinstance(kernels, list) or not kernels:
        raise CiqError(f"manifest {path} lists no [[kernel]]")
    jobs: list[Job] = []
    for i, k in enumerate(kernels, 1):
        where = f"manifest {path}, kernel {i}"
        if not isinstance(k, Mapping):
            raise CiqError(f"{where}: not a table")
        bad = set(k) - _KERNEL_KEYS
        if bad:
            raise CiqError(
                f"{where}: unknown key {sorted(bad)[0]!r} (known: {', '.join(sorted(_KERNEL_KEYS))})"
            )
        if not isinstance(k.get("path"), str):
            raise CiqError(f"{where}: 'path' (the kernel file) is missing")
        archs = k.get("archs")
        if not isinstance(archs, list) or not archs or not all(isinstance(a, str) for a in archs):
            raise CiqError(f'{where}: \'archs\' must be a non-empty list such as ["sm_80", "sm_90a"]')
        minimize, maximize = _names(k.get("minimize", []), where), _names(k.get("maximize", []), where)
        objectives = [[m] for m in minimize] + [[m] for m in maximize]
        if not objectives:
            raise CiqError(f"{where}: give 'minimize' or 'maximize' (the objective metrics)")
        job_trials = _positive(k.get("trials", trials), f"{where}: trials")
        for arch in archs:
            for n, (obj,) in enumerate(objectives):
                jobs.append(
                    Job(
                        kernel=base / k["path"].replace("{arch}", arch),
                        arch=arch,
                        minimize=[obj] if n < len(minimize) else [],
                        maximize=[obj] if n >= len(minimize) else [],
                        trials=job_trials,
                    )
                )
    store = doc.get("store")
    if store is not None and not isinstance(store, str):
        raise CiqError(f"manifest {path}: 'store' must be a path")
    seed = doc.get("seed")
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
        raise CiqError(f"manifest {path}: 'seed' must be an integer")
    return Manifest(store=(base / store) if store else None, storage=doc.get("storage"), seed=seed, jobs=jobs)


def _names(value: Any, where: str) -> list[str]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(v, str) for v in items):
        raise CiqError(f"{where}: objectives must be metric names")
    return list(items)


def _positive(value: Any, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise CiqError(f"{where} must be a whole number >= 1, not {value!r}")
    return value


def check_jobs(jobs: list[Job], compiler_path: str | None) -> dict[tuple[Path, str, str], StoreKey]:
    """Check every job before any work; the store key of each, by (kernel, arch, objective)."""
    keys: dict[tuple[Path, str, str], StoreKey] = {}
    for job in jobs:
        where = f"{job.kernel.name} {job.arch}"
        if is_triton_ref(job.kernel):
            keys[(job.kernel, job.arch, job.objective)] = _triton_key(job, where, compiler_path)
            continue
        check_metric_names(job.minimize + job.maximize)
        compiler = compiler_for_source(job.kernel, compiler_path)
        try:
            compiler.check_arch(job.arch)
        except CiqError as exc:
            raise CiqError(f"{where}: {exc}") from None
        if not job.kernel.is_file():
            raise CiqError(f"manifest kernel not found: {job.kernel}")
        keys[(job.kernel, job.arch, job.objective)] = StoreKey(
            kernel_sha256=file_sha256(job.kernel),
            arch=job.arch,
            compiler=compiler.name,
            compiler_version=compiler.info.version,
            objectives=_objective_names(job),
        )
    return keys


def _objective_names(job: Job) -> tuple[str, ...]:
    objectives = [{"name": m, "direction": "minimize"} for m in job.minimize]
    objectives += [{"name": m, "direction": "maximize"} for m in job.maximize]
    return objective_names(objectives)


def _triton_key(job: Job, where: str, compiler_path: str | None) -> StoreKey:
    """The store key of a Triton job (``path.py:kernel``): file sha256, Triton's ptxas for the
    arch (or ``compiler_path``), the Triton version and fixed meta-parameters as the variant."""
    from ciq_optuna.compilers.triton import load_kernel, parse_ref, store_variant, triton_version
    from ciq_optuna.objectives.triton import RUNTIME_METRICS, triton_compiler

    path, _ = parse_ref(job.kernel)
    if not path.is_file():
        raise CiqError(f"manifest kernel not found: {path}")
    check_metric_names(job.minimize + job.maximize, RUNTIME_METRICS)
    kernel = load_kernel(job.kernel)
    try:
        compiler = triton_compiler(kernel, job.arch, compiler_path)
    except CiqError as exc:
        raise CiqError(f"{where}: {exc}") from None
    return StoreKey(
        kernel_sha256=kernel.file_sha256,
        arch=job.arch,
        compiler=compiler.name,
        compiler_version=compiler.info.version,
        objectives=_objective_names(job),
        variant=store_variant(kernel, triton_version()),
    )


def tune_all(
    manifest: Manifest,
    *,
    store: Path | None = None,
    storage: str | None = None,
    compiler_path: str | None = None,
    jobs_per_tune: int = 1,
    progress: bool = True,
    say: Callable[[str], None] = print,
) -> list[JobResult]:
    """Run every job of the manifest not yet in the store; one :class:`JobResult` per job."""
    from ciq_optuna.tune import TuneConfig, tune

    root = store or manifest.store
    if root is None:
        raise CiqError("no store: give 'store = \"DIR\"' in the manifest or --store DIR")
    st = Store(root)
    if st.root.exists() and not st.root.is_dir():
        raise CiqError(f"store {st.root} is a file, not a directory")
    keys = check_jobs(manifest.jobs, compiler_path)
    results: list[JobResult] = []
    for i, job in enumerate(manifest.jobs, 1):
        label = f"[{i}/{len(manifest.jobs)}] {job.kernel.name} {job.arch} {job.objective}"
        existing = st.find(keys[(job.kernel, job.arch, job.objective)]) if st.root.is_dir() else None
        if existing is not None:
            say(f"{label}: already in the store")
            results.append(JobResult(job, "in store", existing.path, values=_values(existing.acf)))
            continue
        say(f"{label}: tuning ({job.trials} trials)")
        config = TuneConfig(
            kernel=job.kernel,
            arch=job.arch,
            minimize=job.minimize,
            maximize=job.maximize,
            trials=job.trials,
            storage=storage or manifest.storage,
            compiler_path=compiler_path,
            seed=manifest.seed,
            jobs=jobs_per_tune,
            acf=_acf_path(job),
            progress=progress,
            store=st.root,
        )
        try:
            result = tune(config)
        except CiqError as exc:
            say(f"{label}: failed: {exc}")
            results.append(JobResult(job, "failed", detail=str(exc)))
            continue
        entry = st.find(keys[(job.kernel, job.arch, job.objective)])
        results.append(JobResult(job, "tuned", result.store_path, values=_values(entry.acf) if entry else {}))
    return results


def _acf_path(job: Job) -> Path:
    if is_triton_ref(job.kernel):
        stem = str(job.kernel).rpartition(":")[2]
    else:
        stem = job.kernel.stem.removesuffix(f".{job.arch}")
    folder = Path(".ciq-optuna") / "tune-all"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{stem}.{job.arch}.{job.objective}.acf"


def _values(acf: Any) -> dict[str, Any]:
    (o,) = acf.objectives[:1] or [{}]
    return {"baseline": o.get("baseline"), "best": o.get("value"), "flags": acf.flags}


def format_summary(results: list[JobResult]) -> str:
    """One table: kernel, arch, objective, status, baseline, best, change, flags."""
    headers = ["kernel", "arch", "objective", "status", "baseline", "best", "change", "flags"]
    rows = []
    for r in results:
        b, v = r.values.get("baseline"), r.values.get("best")
        change = (
            f"{100.0 * (v - b) / b:+.1f}%" if isinstance(b, (int, float)) and b and v is not None else "-"
        )
        flags = " ".join(r.values.get("flags", [])) if r.values else r.detail
        rows.append(
            [
                r.job.kernel.name,
                r.job.arch,
                r.job.objective,
                r.status,
                _num(b),
                _num(v),
                change,
                flags or "(none: the defaults won)",
            ]
        )
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(headers)]
    widths[-1] = len(headers[-1])
    lines = [
        "  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip(),
        "  ".join("-" * w for w in widths),
    ]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
    return "\n".join(lines)


def _num(value: Any) -> str:
    return "-" if value is None else f"{value:g}"
