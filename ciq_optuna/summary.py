"""What a tuning study found: baseline, best trials, the summary table, de-duplication counts, ACFs.

Shared by ``ciq-optuna tune`` (at the end of a run) and ``ciq-optuna acf from-study``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import optuna
import pandas as pd

from ciq_optuna.acf import Acf, provenance
from ciq_optuna.objectives.compile import CompileObjective
from ciq_optuna.objectives.metrics import COMPILE_METRICS


def baseline_trial(study: optuna.Study) -> optuna.trial.FrozenTrial | None:
    for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)):
        if t.user_attrs.get("baseline"):
            return t
    return None


def best_trials(study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
    """The best trial, or the Pareto front for several objectives (one trial per point).

    Among equally good trials a compiled one wins over one whose compile was skipped on a
    prediction, then the one with the fewest flags (then the earliest), so the ACF carries no
    control that does not earn its place.
    """
    complete = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    if not complete:
        return []
    if len(study.directions) == 1:
        sign = 1.0 if study.direction == optuna.study.StudyDirection.MINIMIZE else -1.0
        return [min(complete, key=lambda t: (sign * t.value, *_tie_break(t)))]
    simplest: dict[tuple[float, ...], optuna.trial.FrozenTrial] = {}
    for t in sorted(study.best_trials, key=_tie_break):
        simplest.setdefault(tuple(t.values), t)  # one trial per Pareto point: the one with fewest flags
    return sorted(simplest.values(), key=lambda t: t.number)


def _tie_break(t: optuna.trial.FrozenTrial) -> tuple[bool, int, int]:
    return (bool(t.user_attrs.get("skipped_compile")), len(t.user_attrs.get("flags", [])), t.number)


#: How a metric the compiler did not report shows in the summary table.
MISSING = "missing"


def trial_metrics(trial: optuna.trial.FrozenTrial) -> dict[str, float | None]:
    """Every metric recorded on a trial: compile metrics and measured ones (None: not measured)."""
    values = dict(trial.user_attrs.get("metrics", {}))
    values.update(trial.user_attrs.get("measured") or {})
    return values


def summary_table(
    baseline: optuna.trial.FrozenTrial | None, best: optuna.trial.FrozenTrial, metrics: Sequence[str]
) -> pd.DataFrame:
    """Baseline vs best on every metric (objectives first), with the change.

    A metric the compiler did not report shows as ``missing``, never as 0, and has no change.
    """
    b = trial_metrics(baseline) if baseline else {}
    t = trial_metrics(best)
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
                "baseline": MISSING if base is None and m in b else base,
                "best": MISSING if val is None else val,
                "change": change,
                "change %": None if pct is None or math.isnan(pct) else round(pct, 1),
            }
        )
    return pd.DataFrame(rows).set_index("metric")


def dedup_stats(study: optuna.Study) -> dict[str, int]:
    """Trials, failures, distinct binaries and measurements saved by binary de-duplication."""
    trials = study.get_trials(deepcopy=False)
    complete = [t for t in trials if t.state == optuna.trial.TrialState.COMPLETE]
    hashes = {t.user_attrs.get("binary_hash") for t in complete if t.user_attrs.get("binary_hash")}
    return {
        "trials": len(trials),
        "complete": len(complete),
        "failed": sum(t.state == optuna.trial.TrialState.FAIL for t in trials),
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
    hashes = {t.user_attrs.get("binary_hash") for t in complete} - {None}
    flag_sets = {tuple(t.user_attrs.get("flags", [])) for t in complete if "binary_hash" in t.user_attrs}
    if len(hashes) != 1 or len(flag_sets) < 2:
        return None
    return (
        f"all {len(complete)} completed candidates ({len(flag_sets)} different flag sets) compiled to "
        f"the same binary (code sha256 {next(iter(hashes))[:12]}...): the searched controls do not "
        "change this kernel's code, so nothing was tuned; check the kernel, --arch and the space"
    )


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
    base_metrics = trial_metrics(baseline) if baseline else {}
    best_metrics = trial_metrics(trial)
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
        kernel={"name": meta["kernel"]["name"], "sha256": meta["kernel"]["sha256"]},
        binary={
            "code_sha256": trial.user_attrs.get("binary_hash"),
            "cubin_sha256": trial.user_attrs.get("cubin_sha256"),
            "note": "cubin_sha256 is of the tuning compile, which adds -v; code_sha256 ignores the "
            "command line ptxas records in .note.nv.tkinfo",
        },
        provenance=provenance(study.study_name, trial.number, storage_shown),
        application=candidate.app,
        triton=triton,
    )
