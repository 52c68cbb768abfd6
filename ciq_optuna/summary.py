"""What a tuning study found: baseline, best trials, the summary table, de-duplication counts, ACFs.

Shared by ``ciq-optuna tune`` (at the end of a run) and ``ciq-optuna acf from-study``.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import optuna
import pandas as pd

from ciq_optuna.acf import Acf, provenance
from ciq_optuna.compilers.base import Compiler
from ciq_optuna.objectives.compile import CompileObjective
from ciq_optuna.objectives.metrics import COMPILE_METRICS, SECONDARY_ORDER

#: Relative tolerance within which two values of a noisy metric (compile time, a measured
#: metric) count as equal when the winner is chosen. Compile metrics other than compile time
#: are exact (the compiler is deterministic): for them only equal values tie.
NOISE_TOLERANCE = 0.02

#: Compile metrics whose values are exact (no noise).
EXACT_METRICS = frozenset(COMPILE_METRICS) - {"compile-time"}

#: A non-objective metric that grows by more than this fraction of its baseline value (or from
#: 0) is reported as a cost of the win.
WORSE_THRESHOLD = 0.10
_WATCHED = ("spill-bytes", "stack", "registers", "shared")


#: User attribute (true) of a trial stopped by Ctrl-C; without an ``error`` it does not count
#: against the budget (it was not evaluated).
INTERRUPTED = "interrupted"


def baseline_trial(study: optuna.Study) -> optuna.trial.FrozenTrial | None:
    for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)):
        if t.user_attrs.get("baseline"):
            return t
    return None


def _study_metrics(study: optuna.Study) -> list[str]:
    meta = study.user_attrs.get("ciq_optuna")
    return list(meta.get("metrics", [])) if isinstance(meta, Mapping) else []


class TrialsByNumber:
    """The trials of a study read once, looked up by number (a study's ``get_trials`` reads the
    storage each time: a look-up per trial would read the whole study per trial)."""

    def __init__(self, trials: Sequence[optuna.trial.FrozenTrial]) -> None:
        self._trials = {t.number: t for t in trials}

    def trial(self, number: int) -> optuna.trial.FrozenTrial | None:
        return self._trials.get(number)


def secondary_key(trial: optuna.trial.FrozenTrial, study: optuna.Study | TrialsByNumber | None = None) -> tuple:
    """The tie-break order among equally good trials (see :data:`SECONDARY_ORDER`); ``study`` (or
    its trials read once) gives the measurement a trial reused from another."""
    values = trial_metrics(trial, study)
    inf = float("inf")
    known = {k: v for k, v in values.items() if v is not None}  # not measured sorts last
    return (
        bool(trial.user_attrs.get("skipped_compile")),  # a compiled trial before a predicted one
        *(known.get(m, inf) for m in SECONDARY_ORDER),
        len(trial.user_attrs.get("flags", [])),
        not trial.user_attrs.get("baseline", False),  # the defaults themselves before an equal copy
        known.get("compile-time", inf),
        trial.number,
    )


def best_trials(study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
    """The best trial, or the Pareto front for several objectives (one trial per point).

    Single objective: among the trials whose value equals the best one (within
    :data:`NOISE_TOLERANCE` for a noisy metric), the first by :func:`secondary_key` wins (a
    compiled trial before one whose compile was skipped on a prediction, then local memory...), so
    the winner uses no more local memory and registers than an equally good trial and the ACF
    carries no control that does not earn its place. Pareto front: one trial per point, the
    first by the same order.
    """
    trials = study.get_trials(deepcopy=False)  # one read: the sort keys look trials up by number
    complete = [t for t in trials if t.state == optuna.trial.TrialState.COMPLETE]
    if not complete:
        return []
    by_number = TrialsByNumber(trials)
    if len(study.directions) == 1:
        sign = 1.0 if study.direction == optuna.study.StudyDirection.MINIMIZE else -1.0
        best = min(sign * t.value for t in complete)
        metrics = _study_metrics(study)
        tol = 0.0 if metrics and metrics[0] in EXACT_METRICS else NOISE_TOLERANCE
        tied = [t for t in complete if sign * t.value <= best + tol * abs(best)]
        return [min(tied, key=lambda t: secondary_key(t, by_number))]
    simplest: dict[tuple[float, ...], optuna.trial.FrozenTrial] = {}
    for t in sorted(study.best_trials, key=lambda t: secondary_key(t, by_number)):
        simplest.setdefault(tuple(t.values), t)  # one trial per Pareto point: the first by secondary order
    return sorted(simplest.values(), key=lambda t: t.number)


#: How a metric the compiler did not report shows in the summary table.
MISSING = "missing"


def trial_metrics(
    trial: optuna.trial.FrozenTrial, study: optuna.Study | TrialsByNumber | None = None
) -> dict[str, float | None]:
    """Every metric recorded on a trial: compile metrics and measured ones (None: not measured).

    A trial whose binary was measured before (``reused_from``) shows the measurement it reused,
    looked up in ``study``.
    """
    values = dict(trial.user_attrs.get("metrics", {}))
    measured = trial.user_attrs.get("measured")
    if not measured and study is not None and "reused_from" in trial.user_attrs:
        source = trial_by_number(study, trial.user_attrs["reused_from"])
        measured = source.user_attrs.get("measured") if source is not None else None
    values.update(measured or {})
    return values


def trial_by_number(study: optuna.Study | TrialsByNumber, number: int) -> optuna.trial.FrozenTrial | None:
    if isinstance(study, TrialsByNumber):
        return study.trial(number)
    for t in study.get_trials(deepcopy=False):
        if t.number == number:
            return t
    return None


def _all_metrics(
    trial: optuna.trial.FrozenTrial, metrics: Sequence[str], study: optuna.Study | None
) -> dict[str, float]:
    """:func:`trial_metrics` plus the trial's objective values (always known for a complete trial)."""
    values = trial_metrics(trial, study)
    for name, value in zip(metrics, trial.values or []):
        values.setdefault(name, value)
    return values


def unit(metric: str) -> str:
    """The unit of a metric ("" for a count or a measured metric)."""
    m = COMPILE_METRICS.get(metric)
    return m.unit if m else ""


def format_value(metric: str, value: float | str | None) -> str:
    """A metric value as shown: compile time in whole milliseconds, other values as they are."""
    if isinstance(value, str):  # MISSING
        return value
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if metric == "compile-time":
        return f"{value:.0f}"
    return f"{value:g}"


def summary_table(
    baseline: optuna.trial.FrozenTrial | None,
    best: optuna.trial.FrozenTrial,
    metrics: Sequence[str],
    study: optuna.Study | None = None,
) -> pd.DataFrame:
    """Baseline vs best on every metric (objectives first), with units and the change.

    A metric the compiler did not report shows as ``missing``, never as 0, and has no change.
    """
    b = _all_metrics(baseline, metrics, study) if baseline else {}
    t = _all_metrics(best, metrics, study)
    rows = []
    names = (
        list(metrics)
        + [m for m in COMPILE_METRICS if m not in metrics]
        + [m for m in t if m not in metrics and m not in COMPILE_METRICS]
    )
    for m in names:
        if m not in t:
            continue
        base, val = b.get(m), t[m]
        change = None if base is None or val is None else val - base
        pct = None if change is None or base == 0 else 100.0 * (val - base) / base
        rows.append(
            {
                "metric": m + (" *" if m in metrics else ""),
                "unit": unit(m),
                "baseline": MISSING if base is None and m in b else base,
                "best": MISSING if val is None else val,
                "change": change,
                "change %": None if pct is None or math.isnan(pct) else round(pct, 1),
            }
        )
    return pd.DataFrame(rows).set_index("metric")


def summary_text(table: pd.DataFrame) -> str:
    """The summary table as console text: one header line, values in their unit's precision."""
    rows = []
    for name, row in table.iterrows():
        metric = str(name).removesuffix(" *")
        pct = row["change %"]
        rows.append(
            {
                "metric": name,
                "unit": row["unit"],
                "baseline": format_value(metric, row["baseline"]),
                "best": format_value(metric, row["best"]),
                "change": format_value(metric, row["change"]),
                "change %": "-" if pct is None or pct != pct else f"{pct:+.1f}".replace("+0.0", "0"),
            }
        )
    return text_table(rows, left=("metric", "unit"))


def text_table(rows: Sequence[Mapping[str, Any]], left: Sequence[str] = ()) -> str:
    """Rows as aligned console text under one header line; ``left`` columns are left-aligned."""
    if not rows:
        return ""
    cols = list(rows[0])
    cells = [[str(c) for c in cols]] + [[str(r.get(c, "")) for c in cols] for r in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(cols))]
    out = []
    for line in cells:
        parts = [
            v.ljust(w) if c in left else v.rjust(w) for c, v, w in zip(cols, line, widths)
        ]
        out.append("  ".join(parts).rstrip())
    return "\n".join(out)


def secondary_warnings(
    baseline: optuna.trial.FrozenTrial | None,
    best: optuna.trial.FrozenTrial,
    metrics: Sequence[str],
    study: optuna.Study | None = None,
) -> list[str]:
    """One line per non-objective metric that got clearly worse than the baseline (a hidden cost)."""
    if baseline is None:
        return []
    b, t = _all_metrics(baseline, metrics, study), _all_metrics(best, metrics, study)
    out = []
    for m in _WATCHED:
        if m in metrics or b.get(m) is None or t.get(m) is None:
            continue
        base, val = b[m], t[m]
        if val > base and (base == 0 or (val - base) / base > WORSE_THRESHOLD):
            pct = "" if base == 0 else f" (+{100.0 * (val - base) / base:.0f} %)"
            line = f"warning: {m} got worse: {base:g} -> {val:g} {unit(m)}{pct}"
            if m == "stack" and "spill-bytes" in metrics:
                line += "; local memory moved from spills to the stack frame"
            out.append(line)
    return out


def front_text(
    front: Sequence[optuna.trial.FrozenTrial], metrics: Sequence[str], study: optuna.Study | None = None
) -> str:
    """The Pareto front as console text, one row per point (in the given order): trial,
    objectives, local memory and registers, flags."""
    rows = []
    extra = [m for m in SECONDARY_ORDER if m not in metrics]
    for t in front:
        values = _all_metrics(t, metrics, study)
        row: dict[str, Any] = {"trial": t.number}
        for m in [*metrics, *extra]:
            label = f"{m} ({unit(m)})" if unit(m) else m
            row[label + (" *" if m in metrics else "")] = format_value(m, values.get(m))
        row["flags"] = " ".join(t.user_attrs.get("flags", [])) or "(none)"
        rows.append(row)
    return text_table(rows, left=("flags",))


def dedup_stats(study: optuna.Study) -> dict[str, int]:
    """Trials, failures, distinct binaries and measurements saved by binary de-duplication."""
    trials = study.get_trials(deepcopy=False)
    complete = [t for t in trials if t.state == optuna.trial.TrialState.COMPLETE]
    hashes = {t.user_attrs.get("binary_hash") for t in complete if t.user_attrs.get("binary_hash")}
    return {
        "trials": len(trials),
        "complete": len(complete),
        "failed": sum(t.state == optuna.trial.TrialState.FAIL for t in trials),
        "interrupted": sum(
            t.state == optuna.trial.TrialState.FAIL and bool(t.user_attrs.get(INTERRUPTED))
            for t in trials
        ),
        "distinct_binaries": len(hashes),
        "reused_measurements": sum("reused_from" in t.user_attrs for t in complete),
        "simplification": sum("simplified_from" in t.user_attrs for t in trials),
    }


def same_binary_warning(study: optuna.Study) -> str | None:
    """A warning when several flag sets were tried and every one compiled to the same binary.

    The search then changed nothing for this kernel (the controls do not apply to it, or the
    flags never reach the compiler) and its "best" is the compiler default.
    """
    complete = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    compiled = [t for t in complete if "binary_hash" in t.user_attrs]
    hashes = {t.user_attrs["binary_hash"] for t in compiled}
    flag_sets = {tuple(t.user_attrs.get("flags", [])) for t in compiled}
    if len(hashes) != 1 or len(flag_sets) < 2:
        return None
    return (
        f"all {len(compiled)} compiled candidates ({len(flag_sets)} different flag sets) compiled to "
        f"the same binary (code sha256 {next(iter(hashes))[:12]}...): the searched controls do not "
        "change this kernel's code, so nothing was tuned; check the kernel, --arch and the space"
    )


BINARY_NOTE = (
    "cubin_sha256: sha256sum of the cubin from the plain command (the flags below, no -v); "
    "tuning_cubin_sha256: of the tuning compile, which adds -v; code_sha256: the code without "
    "the .note.nv.tkinfo section (docs/acf.md)"
)


def plain_cubin_sha256(objective: CompileObjective, candidate: Any, code_sha256: str | None) -> str | None:
    """sha256 of the cubin compiled with the candidate's flags and no ``-v`` (what ``sha256sum`` of a
    user's own compile shows); None if that compile fails or gives other code than the trial, and
    for a front end (Triton) whose binary does not come from one plain compiler command."""
    if not isinstance(objective.compiler, Compiler):  # the Triton front end compiles through Triton
        return None
    with tempfile.TemporaryDirectory(prefix="ciq-plain-") as tmp:
        result = objective.compiler.compile(
            objective.kernel,
            objective.arch,
            objective.command_flags(candidate),
            output=Path(tmp) / "plain.cubin",
            timeout=objective.timeout,
            verbose=False,
        )
    if not result.ok or (code_sha256 is not None and result.code_hash != code_sha256):
        return None
    return result.raw_sha256


def acf_for_trial(
    study: optuna.Study,
    trial: optuna.trial.FrozenTrial,
    meta: Mapping[str, Any],
    objective: CompileObjective,
    storage_shown: str,
) -> Acf:
    """The ACF of one trial of a tuning study."""
    candidate = objective.space.candidate_from_params(trial.params)
    baseline = baseline_trial(study)
    base_metrics = _all_metrics(baseline, meta["metrics"], study) if baseline else {}
    best_metrics = _all_metrics(trial, meta["metrics"], study)
    metrics: dict[str, Any] = {"best": best_metrics, "baseline": base_metrics}
    not_measured = {
        k: sorted(n for n, v in m.items() if v is None) for k, m in metrics.items() if None in m.values()
    }
    if not_measured:  # TOML has no null: list what the compiler did not report instead of writing 0
        metrics["not_measured"] = not_measured
    values = trial.values or []
    objectives = [
        {"name": n, "direction": d, "value": v, "baseline": base_metrics.get(n)}
        for n, d, v in zip(meta["metrics"], meta["directions"], values)
    ]
    passed = {s.name: s.passed(candidate.controls.get(s.name, {})) for s in objective.space.compilers}
    triton = {}
    if meta.get("kind") == "triton":
        from ciq_optuna.objectives.triton import acf_triton_section

        triton = acf_triton_section(meta, objective.compiler, candidate)
    return Acf(
        compiler=meta["compiler"]["name"],
        compiler_version=meta["compiler"]["version"],
        arch=meta["arch"],
        flags=list(trial.user_attrs.get("flags", objective.command_flags(candidate))),
        controls=passed,
        space={"spaces": [{k: v for k, v in s.items() if k != "path"} for s in meta["spaces"]]},
        objectives=objectives,
        metrics=metrics,
        kernel={
            "name": meta["kernel"]["name"],
            "sha256": meta["kernel"]["sha256"],
            **({"variant": meta["kernel"]["variant"]} if meta["kernel"].get("variant") else {}),
        },
        binary={
            "code_sha256": trial.user_attrs.get("binary_hash"),
            "cubin_sha256": plain_cubin_sha256(objective, candidate, trial.user_attrs.get("binary_hash")),
            "tuning_cubin_sha256": trial.user_attrs.get("cubin_sha256"),
            "note": BINARY_NOTE,
        },
        provenance=provenance(study.study_name, trial.number, storage_shown),
        application=candidate.app,
        triton=triton,
    )
