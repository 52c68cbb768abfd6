"""CompileIQ's ``compileiq.utils.validation``: scores, their validation and the two constants.

CompileIQ's custom-worker example imports ``Score`` from here; the definitions live in
:mod:`ciq_optuna.compileiq._compat.scores` (also re-exported by ``ciq_optuna.compileiq.types``).
"""

from __future__ import annotations

import math

from ciq_optuna.compileiq._compat.scores import (
    BASELINE_CONFIG,
    INVALID_SCORE,
    Score,
    SingleScore,
    validate_scores,
)

__all__ = [
    "BASELINE_CONFIG",
    "BASELINE_DNA",
    "INVALID_SCORE",
    "MultiScore",
    "Score",
    "SingleScore",
    "validate_inf_nan",
    "validate_scores",
]

BASELINE_DNA = BASELINE_CONFIG
"""CompileIQ's older name for :data:`BASELINE_CONFIG` (what the baseline measurement receives)."""

MultiScore = list[SingleScore] | tuple[SingleScore, ...]
"""Several objectives' values (each an int, a float or ``"*"``)."""


def validate_inf_nan(val: float) -> float | str:
    """``"*"`` for NaN and +-inf (not representable in a result), else ``val`` unchanged."""
    return INVALID_SCORE if math.isnan(val) or math.isinf(val) else val
