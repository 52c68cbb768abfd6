"""CompileIQ's public types: enums, scores, workers and ``SearchConfiguration``.

Mirrors ``compileiq.types`` so that ``from ciq_optuna.compileiq.types import SearchConfiguration,
ProblemType, ...`` works in place of ``from compileiq.types import ...``.
"""

from __future__ import annotations

import ast
import math
import re
import warnings
from enum import Enum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ciq_optuna.compileiq._compat.scores import (
    BASELINE_CONFIG,
    INVALID_SCORE,
    ParamArg,
    Score,
    invalidate_score,
    normalize_scores,
    validate_scores,
)
from ciq_optuna.compileiq._compat.trackers import (
    BaseTracker,
    DefaultTrackerConfig,
    DisabledTrackerConfig,
    LoguruTrackerConfig,
    MLflowTrackerConfig,
    TrackerConfig,
    TrackerTypes,
)
from ciq_optuna.compileiq._compat.workers import (
    AsyncWorker,
    IsoMultiProcessWorker,
    ManualWorker,
    MultiProcessWorker,
    Worker,
)

__all__ = [
    "BASELINE_CONFIG",
    "INVALID_SCORE",
    "AsyncWorker",
    "BaseTracker",
    "DefaultTrackerConfig",
    "DisabledTrackerConfig",
    "EngineConfig",
    "IsoMultiProcessWorker",
    "LoguruTrackerConfig",
    "MLflowTrackerConfig",
    "ManualWorker",
    "MultiProcessWorker",
    "MultiScoreComparison",
    "ParamArg",
    "ProblemType",
    "Score",
    "SearchConfiguration",
    "TrackerConfig",
    "TrackerTypes",
    "Worker",
    "WorkerTypes",
    "invalidate_score",
    "normalize_scores",
    "validate_scores",
]


class _StrEnum(str, Enum):
    def __str__(self) -> str:
        return str(self.value)


class ProblemType(_StrEnum):
    """Direction shared by all objectives."""

    MIN = "min"
    MAX = "max"


class MultiScoreComparison(_StrEnum):
    """How ``get_best_result`` ranks rows with several objectives."""

    AVERAGE = "avg"
    STDDEV = "stddev"
    PARETO = "pareto_front"


class WorkerTypes(_StrEnum):
    """The built-in workers. ``DEFAULT`` is ``NATIVE``; Ray is not provided (see docs/compileiq.md)."""

    NATIVE = "native"
    DEFAULT = "native"
    ISOLATED = "isolated"
    RAY = "ray"
    ASYNC = "async"
    MANUAL = "manual"

    def worker_type(self) -> type[Worker]:
        """The worker class of this type."""
        if self is WorkerTypes.RAY:
            raise ValueError(
                "the Ray worker is not available in ciq-optuna: run several processes on one "
                "Search(storage=..., study_name=...) instead (see docs/compileiq.md)"
            )
        return {
            WorkerTypes.NATIVE: MultiProcessWorker,
            WorkerTypes.ISOLATED: IsoMultiProcessWorker,
            WorkerTypes.ASYNC: AsyncWorker,
            WorkerTypes.MANUAL: ManualWorker,
        }[self]


class EngineConfig(BaseModel):
    """CompileIQ 1.1's engine selection; ``options`` map onto the genetic sampler.

    Known options: ``seed``, ``survivor_count``, ``mutation_probability``.
    """

    model_config = ConfigDict(extra="forbid")

    name: str = "amber"
    options: dict[str, Any] = Field(default_factory=dict)


def _derived_pool(n: int) -> int:
    pool = max(math.ceil((2 * n + 1) / 0.25), 32)
    return pool + pool % 2


def _derived_cull(pool: int, n: int) -> int:
    cull = min(int(0.75 * pool), pool - (1 + 2 * n))
    return cull - cull % 2


class SearchConfiguration(BaseModel):
    """The search settings of CompileIQ, with its defaults, derivations and checks.

    ``pool_size`` (candidates per generation) defaults to ``max(ceil((2n+1)/0.25), 32)``
    rounded up to even (32 for one objective); ``cull_size`` to ``0.75 * pool_size`` rounded
    down to even, leaving at least ``1 + 2n`` survivors (24 for a pool of 32).
    """

    model_config = ConfigDict(extra="forbid", use_enum_values=False)

    problem_type: ProblemType = ProblemType.MIN
    normalize: bool = False
    num_objectives: int = Field(default=1, gt=0)
    generations: int = Field(gt=0)
    pool_size: int | None = Field(default=None, gt=5)
    cull_size: int | None = Field(default=None, gt=1)
    mutate_rate: float = Field(default=0.25, gt=0, lt=1)
    objective_weights: list[float] | None = None
    init_with_true_random_threshold: float = 0.9
    enable_large_fail_pool: bool = True

    @model_validator(mode="after")
    def _derive_and_check(self) -> SearchConfiguration:
        n = self.num_objectives
        need = 1 + 2 * n
        if self.pool_size is None:
            self.pool_size = _derived_pool(n)
        if self.cull_size is None:
            self.cull_size = _derived_cull(self.pool_size, n)
            if self.cull_size < 2:
                raise ValueError(
                    f"pool_size ({self.pool_size}) is too small for {n} objectives: "
                    f"it needs at least {need} survivors plus a cull of 2"
                )
        if self.cull_size % 2:
            raise ValueError(f"cull_size ({self.cull_size}) must be even")
        if self.cull_size >= self.pool_size:
            raise ValueError(f"cull_size ({self.cull_size}) must be less than pool_size ({self.pool_size})")
        survivors = self.pool_size - self.cull_size
        if survivors < need:
            raise ValueError(
                f"Number of survivors (pool_size - cull_size = {survivors}) is too small. "
                f"Need at least {need} for {n} objectives"
            )
        if self.objective_weights is not None:
            if len(self.objective_weights) != n:
                raise ValueError(
                    f"the number of objective_weights ({len(self.objective_weights)}) must be equal to num_objectives ({n})"
                )
            if not math.isclose(sum(self.objective_weights), 1.0, rel_tol=0, abs_tol=1e-9):
                raise ValueError(
                    f"objective_weights must add up to 1.0 (they add up to {sum(self.objective_weights)})"
                )
        return self

    @property
    def survivors(self) -> int:
        """``pool_size - cull_size``: the candidates kept from one generation to the next."""
        return int(self.pool_size) - int(self.cull_size)

    def to_json_dict(self) -> dict[str, Any]:
        """The settings as a JSON-able dict, without None values."""
        return {k: v for k, v in self.model_dump(mode="json").items() if v is not None}

    # -- CompileIQ's legacy ``.config`` format: lines ``(key . value)`` -------------------
    def to_legacy(self) -> str:
        """The settings in CompileIQ's legacy lisp format."""
        items: dict[str, Any] = {
            "seek_minimum": self.problem_type == ProblemType.MIN,
            "qualitative": not self.normalize,
            "num_objectives": self.num_objectives,
            "generations": self.generations,
            "pool_size": self.pool_size,
            "cull_size": self.cull_size,
            "mutate_rate": self.mutate_rate,
            "init_with_true_random_threshold": self.init_with_true_random_threshold,
            "enable_large_fail_pool": self.enable_large_fail_pool,
        }
        if self.objective_weights is not None:
            items["objective_weights"] = "(" + " ".join(str(w) for w in self.objective_weights) + ")"

        def show(v: Any) -> str:
            return ("#t" if v else "#f") if isinstance(v, bool) else str(v)

        return "(\n" + "".join(f" ({k} . {show(v)})\n" for k, v in items.items()) + ")\n"

    @classmethod
    def from_legacy(cls, path: str | Path) -> SearchConfiguration:
        """Read a legacy ``.config`` file (see :meth:`to_legacy`)."""
        path = Path(path)
        if path.suffix != ".config":
            raise ValueError(f"{path}: a legacy search configuration must have the extension .config")
        if not path.is_file():
            raise ValueError(f"{path}: no such legacy configuration file")
        fields: dict[str, Any] = {}
        for key, raw in re.findall(
            r"\(\s*([A-Za-z_][\w-]*)\s+\.\s+((?:\([^()]*\))|[^()]*?)\s*\)", path.read_text()
        ):
            raw = raw.strip()
            try:
                if raw in ("#t", "#f"):
                    value: Any = raw == "#t"
                elif raw.startswith("("):
                    value = [ast.literal_eval(tok) for tok in raw[1:-1].split()]
                else:
                    value = ast.literal_eval(raw)
            except (SyntaxError, ValueError) as exc:
                raise ValueError(f"Invalid value for legacy configuration field {key}: {raw!r}") from (
                    exc if isinstance(exc, SyntaxError) else SyntaxError(str(exc))
                )
            if key == "seek_minimum":
                fields["problem_type"] = ProblemType.MIN if value else ProblemType.MAX
            elif key == "qualitative":
                fields["normalize"] = not value
            elif key in cls.model_fields:
                fields[key] = value
            else:
                warnings.warn(f"Configuration {key} is going to be ignored", stacklevel=2)
        return cls(**fields)
