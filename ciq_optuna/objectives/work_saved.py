"""Work a tuning study saved: compiles skipped on predicted repeats, measurements reused.

Read from the trials' user attributes that :class:`~ciq_optuna.objectives.compile.CompileObjective`
records (``flags``, ``binary_hash``, ``skipped_compile``, ``reused_from``, ``prediction_ok``), so it
works on any study tuned with that objective, finished or resumed.
"""

from __future__ import annotations

import optuna

STUDY_ATTR = "work_saved"


def work_saved(study: optuna.Study) -> dict[str, int]:
    """Trials, compiles run and skipped, distinct binaries, measurements reused, prediction checks."""
    finished = [
        t
        for t in study.get_trials(deepcopy=False)
        if t.state in (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.FAIL)
    ]
    skipped = [t for t in finished if t.user_attrs.get("skipped_compile")]
    compiled = [t for t in finished if "flags" in t.user_attrs and not t.user_attrs.get("skipped_compile")]
    checks = [t for t in compiled if "prediction_ok" in t.user_attrs]
    return {
        "trials": len(finished),
        "compiles_run": len(compiled),
        "compiles_skipped": len(skipped),
        "distinct_binaries": len({t.user_attrs["binary_hash"] for t in compiled if t.user_attrs.get("binary_hash")}),
        "measurements_reused": sum("reused_from" in t.user_attrs for t in compiled),
        "predictions_checked": len(checks),
        "predictions_wrong": sum(not t.user_attrs["prediction_ok"] for t in checks),
    }


def record_work_saved(study: optuna.Study) -> dict[str, int]:
    """:func:`work_saved`, also stored as the study user attribute ``work_saved``."""
    work = work_saved(study)
    study.set_user_attr(STUDY_ATTR, work)
    return work


def _count(n: int, noun: str, plural: str = "") -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {plural or noun + 's'}"


def format_work_saved(work: dict[str, int]) -> str:
    """One line for the end of a tune run."""
    share = work["compiles_skipped"] / work["trials"] if work["trials"] else 0.0
    return (
        f"work: {_count(work['trials'], 'trial')}, {_count(work['compiles_run'], 'compile')} run, "
        f"{work['compiles_skipped']} skipped ({100 * share:.0f}%: predicted to repeat a binary already "
        f"measured; {_count(work['predictions_checked'], 'prediction')} checked by compiling, "
        f"{work['predictions_wrong']} wrong), {_count(work['distinct_binaries'], 'distinct binary', 'distinct binaries')}, "
        f"{_count(work['measurements_reused'], 'measurement')} reused"
    )
