"""CompileIQ's search-space DSL: ``range``, ``choice``, ``literal``, ``log_sampling``.

A search space is a (nested) dict whose leaves are the parameter configs built here. Each
parameter can carry ``knockout_prob``, the probability that its key is left out of the dict the
objective receives; in ciq-optuna that is an on/off gene (``<key>.__present__``) whose initial
population follows the probability and which the sampler then evolves.
"""

from __future__ import annotations

import builtins
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "ChoiceParamConfig",
    "LiteralParamConfig",
    "ParamConfig",
    "RangeParamConfig",
    "choice",
    "literal",
    "log_sampling",
    "range",
]


def _knockout_threshold(knockout_prob: Any) -> float | None:
    """Validate ``knockout_prob`` and return CompileIQ's ``knockout_threshold = 1 - p``."""
    if knockout_prob is None:
        return None
    if isinstance(knockout_prob, bool) or not isinstance(knockout_prob, (int, float, np.number)):
        raise TypeError(f"knockout_prob must be a number between 0 and 1, got {knockout_prob!r}")
    p = float(knockout_prob)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"knockout_prob must lie in [0, 1], got {p}")
    return 1.0 - p


def _scalar(value: Any) -> Any:
    """A Python scalar for a numpy scalar, ``int`` for a bool, the value otherwise."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bool):
        return int(value)
    return value


def _clean(x: float) -> float:
    """Remove the floating-point noise of ``start + k * step`` (0.30000000000000004 -> 0.3)."""
    return float(f"{x:.12g}")


@dataclass(frozen=True)
class ParamConfig:
    """Base of the parameter configs: the knockout threshold (``1 - knockout_prob``) or None."""

    knockout_threshold: float | None = field(default=None, kw_only=True)

    @property
    def knockout_prob(self) -> float | None:
        """Probability that the key is absent from the objective's dict (None: always present)."""
        return None if self.knockout_threshold is None else 1.0 - self.knockout_threshold


@dataclass(frozen=True)
class RangeParamConfig(ParamConfig):
    """Values ``low, low + step, ...`` up to ``high`` (inclusive when on the grid)."""

    low: int | float
    high: int | float
    step: int | float = 1
    seed_low: int | float | None = None
    seed_high: int | float | None = None
    type: str = "range"

    @property
    def is_int(self) -> bool:
        """True when low, high and step are all integers (the values are then ints)."""
        return all(isinstance(v, int) for v in (self.low, self.high, self.step))

    @property
    def last(self) -> int | float:
        """The largest value on the grid (``high`` when it lies on it)."""
        k = math.floor((self.high - self.low) / self.step + 1e-9)
        return self.low + k * self.step if self.is_int else _clean(self.low + k * self.step)

    def values(self) -> list[int | float]:
        """Every value on the grid, in order."""
        k = math.floor((self.high - self.low) / self.step + 1e-9)
        if self.is_int:
            return [self.low + i * self.step for i in builtins.range(k + 1)]
        return [_clean(self.low + i * self.step) for i in builtins.range(k + 1)]

    def snap(self, value: float) -> int | float:
        """The grid value nearest to ``value``."""
        k = round((value - self.low) / self.step)
        k = min(max(k, 0), math.floor((self.high - self.low) / self.step + 1e-9))
        return self.low + k * self.step if self.is_int else _clean(self.low + k * self.step)


@dataclass(frozen=True)
class ChoiceParamConfig(ParamConfig):
    """A uniform categorical over ``vals`` (CompileIQ's ``enum``)."""

    vals: list[Any]
    type: str = "enum"


@dataclass(frozen=True)
class LiteralParamConfig(ParamConfig):
    """A constant that is always passed (unless knocked out)."""

    value: str | int | float
    type: str = "literal"


AnyParamConfig = RangeParamConfig | ChoiceParamConfig | LiteralParamConfig


def range(  # noqa: A001 - CompileIQ's name
    start: int | float,
    end: int | float,
    step: int | float = 1,
    knockout_prob: float | None = None,
    seed_low: int | float | None = None,
    seed_high: int | float | None = None,
) -> RangeParamConfig:
    """Values ``start, start + step, ...`` not beyond ``end``; ``end`` is included when on the grid.

    ``seed_low``/``seed_high`` narrow where the first generation is drawn (a share
    ``init_with_true_random_threshold`` of it); later generations use the whole range.
    Example: ``range(0, 8, 2)`` gives 0, 2, 4, 6, 8.
    """
    start, end, step = _scalar(start), _scalar(end), _scalar(step)
    for name, v in (("start", start), ("end", end), ("step", step)):
        if not isinstance(v, (int, float)) or (isinstance(v, float) and not math.isfinite(v)):
            raise ValueError(f"range {name} must be a finite int or float, got {v!r}")
    if end <= start:
        raise ValueError("Please provide a proper range value where start < end.")
    if step <= 0:
        raise ValueError("Range parameters require a positive step size")
    if seed_low is not None and not start <= seed_low <= end:
        raise ValueError(f"`seed_low` falls outside the configured range [{start}, {end}]")
    if seed_high is not None and not start <= seed_high <= end:
        raise ValueError(f"`seed_high` falls outside the configured range [{start}, {end}]")
    if seed_low is not None and seed_high is not None and seed_high < seed_low:
        raise ValueError("`seed_high` must be greater than or equal to `seed_low`")
    return RangeParamConfig(
        low=start,
        high=end,
        step=step,
        seed_low=_scalar(seed_low),
        seed_high=_scalar(seed_high),
        knockout_threshold=_knockout_threshold(knockout_prob),
    )


def choice(choice_list: Any, knockout_prob: float | None = None) -> ChoiceParamConfig:
    """A uniform choice among ``choice_list`` (ints, floats, bools -> ints, strings)."""
    vals = [_scalar(v) for v in list(choice_list)]
    if not vals:
        raise ValueError("choice() needs at least one value")
    for v in vals:
        if not isinstance(v, (int, float, str)):
            raise ValueError(f"choice values must be int, float, bool or str, got {v!r}")
    return ChoiceParamConfig(vals=vals, knockout_threshold=_knockout_threshold(knockout_prob))


def literal(const_value: Any, knockout_prob: float | None = None) -> LiteralParamConfig:
    """A constant, mostly used as an on/off flag through ``knockout_prob``."""
    value = _scalar(const_value)
    if not isinstance(value, (str, int, float)):
        raise ValueError("Literal `const_value` must be a str, int, or float.")
    return LiteralParamConfig(value=value, knockout_threshold=_knockout_threshold(knockout_prob))


def log_sampling(
    start: float, end: float, total: int = 10, knockout_prob: float | None = None
) -> ChoiceParamConfig:
    """A choice among ``total`` geometrically spaced points of ``[start, end]`` (both > 0)."""
    if start <= 0 or end <= 0:
        raise ValueError("log_sampling needs start > 0 and end > 0")
    if total < 1:
        raise ValueError("log_sampling needs total >= 1")
    points = [float(v) for v in np.geomspace(start, end, int(total))]
    points[0], points[-1] = float(start), float(end)
    return choice(points, knockout_prob=knockout_prob)
