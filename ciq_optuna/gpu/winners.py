"""Validate winners: re-measure candidates against the baseline and keep only real improvements.

A search that picks the best of many noisy measurements is biased towards lucky ones (the
winner's curse). Validation measures each candidate ACF again, against the baseline, in fresh
processes (``sessions`` of them per candidate, the candidates' order rotated between sessions),
each session interleaving baseline and candidate. A candidate is KEPT only when all hold:

- significance: one-sided Welch's t-test (candidate better than baseline), p-value adjusted for
  the number of candidates (Holm-Bonferroni by default, or Bonferroni) below ``alpha`` (0.05);
- size: relative improvement of the mean >= ``min_improvement`` (1 %) and Cohen's d (pooled
  sd = sqrt((s_b^2 + s_c^2) / 2)) >= ``min_effect`` (0.2);
- stability: the candidate's p5-p95 spread is at most ``1 + max_spread_increase`` (1.25) times
  the baseline's.

Outliers (``outlier_k`` = 5 scaled MADs, at most 5 % of a sample) are left out of the tests;
raw samples are kept in the record. A record ``<acf stem>.validation.json`` is written next
to each ACF: environment, GPU, driver, compiler versions, settings, samples, p-values, decision.

This module decides and records; it needs no GPU. The samples come from ``measure``: on a GPU,
:class:`ciq_optuna.gpu.validate.GpuAcfMeasure`.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import math
import platform
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ciq_optuna import __version__
from ciq_optuna.errors import CiqError
from ciq_optuna.gpu.errors import GpuUnavailableError
from ciq_optuna.gpu.stats import outlier_mask

RECORD_FORMAT = "ciq-optuna-validation"
RECORD_VERSION = 1


@dataclass
class Comparison:
    """One session: baseline and candidate samples measured interleaved in one fresh process."""

    baseline: list[float]
    candidate: list[float]
    environment: dict[str, Any] = field(default_factory=dict)


Measure = Callable[[Path], "Comparison | Mapping[str, Any]"]
"""``measure(acf_path) -> Comparison`` (or a mapping with ``baseline``, ``candidate`` and optional
``environment``); raises :class:`~ciq_optuna.errors.CiqError` when the candidate cannot be
measured (wrong results, crash), which rejects it."""


@dataclass(frozen=True)
class ValidationSettings:
    """Decision rules (see the module docstring for their meaning and defaults)."""

    sessions: int = 3
    alpha: float = 0.05
    correction: str = "holm"
    min_improvement: float = 0.01
    min_effect: float = 0.2
    max_spread_increase: float = 0.25
    outlier_k: float = 5.0
    direction: str = "minimize"
    metric: str = "time_ms"

    def __post_init__(self) -> None:
        if self.correction not in ("holm", "bonferroni", "none"):
            raise CiqError(f"unknown correction {self.correction!r}; use holm, bonferroni or none")
        if self.direction not in ("minimize", "maximize"):
            raise CiqError(f"unknown direction {self.direction!r}; use minimize or maximize")
        if self.sessions < 1:
            raise CiqError("sessions must be at least 1")
        if not 0 < self.alpha < 1:
            raise CiqError("alpha must be between 0 and 1")


@dataclass
class CandidateResult:
    """Statistics and decision for one ACF."""

    acf: str
    kept: bool
    reason: str
    n_baseline: int = 0
    n_candidate: int = 0
    mean_baseline: float = math.nan
    mean_candidate: float = math.nan
    sd_baseline: float = math.nan
    sd_candidate: float = math.nan
    improvement: float = math.nan
    cohen_d: float = math.nan
    p_value: float = math.nan
    p_adjusted: float = math.nan
    spread_ratio: float = math.nan
    record: str | None = None


@dataclass
class ValidationReport:
    """All candidates' results, in the order the ACFs were given."""

    settings: ValidationSettings
    candidates: list[CandidateResult]

    @property
    def kept(self) -> list[CandidateResult]:
        """The candidates that passed every rule."""
        return [c for c in self.candidates if c.kept]

    def format_table(self) -> str:
        """A plain-text table, one line per candidate."""
        lines = [f"{'decision':9} {'improv.':>8} {'d':>6} {'p(adj)':>9}  acf / reason"]
        for c in self.candidates:
            lines.append(
                f"{'KEPT' if c.kept else 'REJECTED':9} {c.improvement * 100:7.2f}% {c.cohen_d:6.2f} "
                f"{c.p_adjusted:9.2g}  {c.acf}: {c.reason}"
            )
        return "\n".join(lines)


def welch_one_sided(better: Sequence[float], worse: Sequence[float]) -> float:
    """p-value of Welch's t-test that ``better`` has a smaller mean than ``worse``."""
    try:
        from scipy import stats
    except ImportError:
        raise CiqError("validating winners needs scipy: pip install 'ciq-optuna[gpu]'") from None

    res = stats.ttest_ind(worse, better, equal_var=False, alternative="greater")
    p = float(res.pvalue)
    return 1.0 if math.isnan(p) else p


def cohen_d(baseline: Sequence[float], candidate: Sequence[float]) -> float:
    """(mean_b - mean_c) / sqrt((s_b^2 + s_c^2) / 2); positive when the candidate is smaller."""
    b, c = np.asarray(baseline, float), np.asarray(candidate, float)
    pooled = math.sqrt((b.var(ddof=1) + c.var(ddof=1)) / 2)
    diff = b.mean() - c.mean()
    if pooled == 0:
        return math.copysign(math.inf, diff) if diff else 0.0
    return float(diff / pooled)


def adjust_pvalues(pvalues: Sequence[float], method: str = "holm") -> list[float]:
    """Family-wise error correction: Holm's step-down (default), Bonferroni, or none."""
    p = [float(v) for v in pvalues]
    m = len(p)
    if method == "none" or m == 0:
        return p
    if method == "bonferroni":
        return [min(1.0, v * m) for v in p]
    if method != "holm":
        raise CiqError(f"unknown correction {method!r}")
    order = sorted(range(m), key=lambda i: p[i])
    out = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        out[i] = running
    return out


def _spread(x: np.ndarray) -> float:
    return float(np.percentile(x, 95) - np.percentile(x, 5))


def _as_comparison(value: Comparison | Mapping[str, Any]) -> Comparison:
    if isinstance(value, Comparison):
        return value
    return Comparison(
        baseline=list(value["baseline"]),
        candidate=list(value["candidate"]),
        environment=dict(value.get("environment", {})),
    )


def _base_environment() -> dict[str, Any]:
    env: dict[str, Any] = {
        "ciq_optuna": __version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "host": platform.node(),
    }
    for mod in ("numpy", "scipy", "optuna", "cupy"):
        m = sys.modules.get(mod)
        if m is not None:
            env[mod] = getattr(m, "__version__", None)
    return env


def _acf_info(path: Path) -> dict[str, Any]:
    info: dict[str, Any] = {"path": str(path)}
    try:
        info["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return info
    try:
        from ciq_optuna.acf import read_acf

        acf = read_acf(path)
    except Exception:
        return info
    info.update(compiler=acf.compiler, compiler_version=acf.compiler_version, arch=acf.arch, flags=acf.flags)
    return info


def record_path(acf_path: str | Path) -> Path:
    """Where the validation record of an ACF goes: ``kernel.acf`` -> ``kernel.validation.json``."""
    p = Path(acf_path)
    return p.with_name(p.stem + ".validation.json")


def _decide(
    acf: str, base: list[float], cand: list[float], s: ValidationSettings
) -> tuple[CandidateResult, np.ndarray, np.ndarray]:
    b = np.asarray(base, float)
    c = np.asarray(cand, float)
    b = b[~outlier_mask(b, s.outlier_k)]
    c = c[~outlier_mask(c, s.outlier_k)]
    if s.direction == "maximize":  # test on the negated values: larger is better
        bt, ct = -b, -c
    else:
        bt, ct = b, c
    res = CandidateResult(acf=acf, kept=False, reason="")
    res.n_baseline, res.n_candidate = int(b.size), int(c.size)
    res.mean_baseline, res.mean_candidate = float(b.mean()), float(c.mean())
    res.sd_baseline = float(b.std(ddof=1)) if b.size > 1 else math.nan
    res.sd_candidate = float(c.std(ddof=1)) if c.size > 1 else math.nan
    res.improvement = float((bt.mean() - ct.mean()) / abs(bt.mean())) if bt.mean() else math.nan
    res.cohen_d = cohen_d(bt, ct) if b.size > 1 and c.size > 1 else math.nan
    res.p_value = welch_one_sided(ct, bt) if b.size > 1 and c.size > 1 else 1.0
    sb = _spread(b)
    res.spread_ratio = _spread(c) / sb if sb > 0 else (1.0 if _spread(c) == 0 else math.inf)
    return res, b, c


def validate_acfs(
    acf_paths: Sequence[str | Path],
    *,
    measure: Measure,
    settings: ValidationSettings | None = None,
    write_records: bool = True,
    progress: Callable[[str], None] | None = None,
) -> ValidationReport:
    """Re-measure each ACF against the baseline with ``measure`` and decide which to keep.

    ``measure(acf_path)`` is called ``settings.sessions`` times per ACF (the order of the ACFs
    rotates each session, so no candidate always runs first or last); the samples of all sessions
    are pooled. A candidate whose measurement raises :class:`CiqError` is rejected with that
    reason and not counted in the correction; :class:`GpuUnavailableError` (no cupy, no GPU)
    stops the whole validation instead. Records are written next to the ACFs unless
    ``write_records=False``.
    """
    s = settings or ValidationSettings()
    paths = [Path(p) for p in acf_paths]
    if not paths:
        raise CiqError("no ACF to validate")
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise CiqError(f"ACF not found: {', '.join(missing)}")
    base: dict[int, list[float]] = {i: [] for i in range(len(paths))}
    cand: dict[int, list[float]] = {i: [] for i in range(len(paths))}
    envs: dict[int, list[dict[str, Any]]] = {i: [] for i in range(len(paths))}
    failed: dict[int, str] = {}
    for session in range(s.sessions):
        order = [(session + k) % len(paths) for k in range(len(paths))]
        for i in order:
            if i in failed:
                continue
            if progress:
                progress(f"session {session + 1}/{s.sessions}: {paths[i]}")
            try:
                comp = _as_comparison(measure(paths[i]))
            except GpuUnavailableError:
                raise
            except CiqError as exc:
                failed[i] = str(exc)
                continue
            base[i].extend(float(v) for v in comp.baseline)
            cand[i].extend(float(v) for v in comp.candidate)
            envs[i].append(comp.environment)
    results: list[CandidateResult] = []
    samples: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for i, p in enumerate(paths):
        if i in failed:
            results.append(CandidateResult(acf=str(p), kept=False, reason=f"measurement failed: {failed[i]}"))
            continue
        res, b, c = _decide(str(p), base[i], cand[i], s)
        results.append(res)
        samples[i] = (b, c)
    measured = sorted(samples)
    adjusted = adjust_pvalues([results[i].p_value for i in measured], s.correction)
    for i, padj in zip(measured, adjusted, strict=True):
        r = results[i]
        r.p_adjusted = padj
        why = []
        if not padj < s.alpha:
            why.append(f"not significant (p_adj={padj:.3g} >= {s.alpha:g})")
        if not r.improvement >= s.min_improvement:
            why.append(f"improvement {r.improvement * 100:.2f}% < {s.min_improvement * 100:g}%")
        if not r.cohen_d >= s.min_effect:
            why.append(f"Cohen's d {r.cohen_d:.2f} < {s.min_effect:g}")
        if not r.spread_ratio <= 1 + s.max_spread_increase:
            why.append(f"p5-p95 spread x{r.spread_ratio:.2f} > x{1 + s.max_spread_increase:g}")
        r.kept = not why
        r.reason = (
            f"{r.improvement * 100:.2f}% better, d={r.cohen_d:.2f}, p_adj={padj:.3g}"
            if r.kept
            else "; ".join(why)
        )
    report = ValidationReport(settings=s, candidates=results)
    if write_records:
        n_compared = len(measured)
        for i, r in enumerate(results):
            doc = {
                "format": RECORD_FORMAT,
                "format_version": RECORD_VERSION,
                "created": _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat(),
                "acf": _acf_info(paths[i]),
                "decision": "KEPT" if r.kept else "REJECTED",
                "reason": r.reason,
                "settings": asdict(s),
                "candidates_compared": n_compared,
                "statistics": {
                    k: v for k, v in asdict(r).items() if k not in ("acf", "kept", "reason", "record")
                },
                "samples": {"metric": s.metric, "baseline": base[i], "candidate": cand[i]},
                "environment": {"host": _base_environment(), "sessions": envs[i]},
            }
            out = record_path(paths[i])
            tmp = out.with_name(out.name + ".tmp")
            tmp.write_text(json.dumps(_json_safe(doc), indent=1) + "\n", encoding="utf-8")
            tmp.replace(out)
            r.record = str(out)
    return report


def _json_safe(value: Any) -> Any:
    """NaN and infinities are not JSON: write them as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value
