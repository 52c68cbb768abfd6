"""Scores as CompileIQ defines them: numbers or ``"*"`` (invalid), one per objective."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, model_validator

__all__ = [
    "BASELINE_CONFIG",
    "INVALID_SCORE",
    "ParamArg",
    "Score",
    "invalidate_score",
    "normalize_scores",
    "validate_scores",
]

INVALID_SCORE: Literal["*"] = "*"
"""The score of a failed evaluation (any objective); NaN and +-inf are turned into it."""

BASELINE_CONFIG: dict = {}
"""What the objective receives for the baseline measurement when ``normalize=True``."""

ParamArg = dict | str | list
SingleScore = int | float | str
_TYPES_MESSAGE = (
    "One or more return types of your objective function does not match expected types: int | float | '*'"
)


def _single(value: Any) -> SingleScore:
    """One objective's value: an int, a float, or ``"*"`` (for NaN/inf too); anything else raises."""
    if isinstance(value, str):
        if value == INVALID_SCORE:
            return INVALID_SCORE
    elif isinstance(value, (bool, np.bool_)):
        pass
    elif isinstance(value, int):
        return value
    elif isinstance(value, (float, np.floating, np.integer)):
        f = float(value)
        return f if math.isfinite(f) else INVALID_SCORE
    raise ValueError(f"{_TYPES_MESSAGE} (got {value!r} of type {type(value).__name__})")


def validate_scores(ret: Any, num_objectives: int) -> SingleScore | tuple[SingleScore, ...]:
    """Check an objective's return value: a scalar for one objective, an n-tuple/list for n.

    ``"*"`` alone stands for all n objectives. Raises ValueError (CompileIQ's message plus what
    was received) for a wrong type or arity.
    """
    if num_objectives == 1:
        if isinstance(ret, (tuple, list, np.ndarray)):
            raise ValueError(f"{_TYPES_MESSAGE} (expected one value, got a {type(ret).__name__})")
        return _single(ret)
    if isinstance(ret, str) and ret == INVALID_SCORE:
        return (INVALID_SCORE,) * num_objectives
    if isinstance(ret, np.ndarray):
        ret = list(ret.ravel())
    if not isinstance(ret, (tuple, list)) or len(ret) != num_objectives:
        got = f"{len(ret)} values" if isinstance(ret, (tuple, list)) else repr(ret)
        raise ValueError(f"{_TYPES_MESSAGE} (expected {num_objectives} values, got {got})")
    return tuple(_single(v) for v in ret)


def invalidate_score(num_objectives: int) -> SingleScore | tuple[SingleScore, ...]:
    """The score of a failed evaluation: ``"*"`` or an n-tuple of ``"*"``."""
    return INVALID_SCORE if num_objectives == 1 else (INVALID_SCORE,) * num_objectives


def normalize_scores(score: Any, baseline: Any) -> Any:
    """``score / baseline`` element-wise; ``"*"`` where either is invalid or the baseline is 0."""
    if baseline is None:
        raise RuntimeError("No baseline score available for normalization")

    def one(s: Any, b: Any) -> SingleScore:
        if isinstance(s, str) or isinstance(b, str) or b == 0:
            return INVALID_SCORE
        return s / b

    if isinstance(score, (tuple, list)):
        if not isinstance(baseline, (tuple, list)) or len(baseline) != len(score):
            raise RuntimeError(f"baseline {baseline!r} does not match score {score!r}")
        return [one(s, b) for s, b in zip(score, baseline, strict=True)]
    return one(score, baseline)


class Score(BaseModel):
    """One evaluated candidate: raw score, normalized score, what the objective received, where."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    score: Any
    norm_score: Any = None
    params: Any = None
    metadata: str = ""
    param_id: int | str | None = None
    num_objectives: int = 1
    is_baseline: bool = False
    error: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _check(cls, data: Any) -> Any:
        if isinstance(data, dict):
            n = int(data.get("num_objectives", 1))
            data = dict(data)
            data["score"] = validate_scores(data.get("score"), n)
            if data.get("norm_score") is not None:
                data["norm_score"] = validate_scores(_as_tuple(data["norm_score"], n), n)
        return data

    @property
    def failed(self) -> bool:
        """True when any raw or normalized objective is ``"*"``."""
        values = list(_as_seq(self.score))
        if self.norm_score is not None:
            values += list(_as_seq(self.norm_score))
        return any(isinstance(v, str) for v in values)

    def values(self, normalized: bool) -> list[SingleScore]:
        """The raw (or normalized) objectives as a list."""
        return list(_as_seq(self.norm_score if normalized else self.score))


def _as_seq(value: Any) -> Sequence[Any]:
    return value if isinstance(value, (tuple, list)) else (value,)


def _as_tuple(value: Any, n: int) -> Any:
    return tuple(value) if n > 1 and isinstance(value, list) else value
