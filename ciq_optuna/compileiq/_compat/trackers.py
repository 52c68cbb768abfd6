"""CompileIQ's tracker names, mapped onto what ciq-optuna records.

Every candidate of a ``Search`` is an Optuna trial, so the study (``search.study``, viewed with
``optuna-dashboard`` or ``ciq-optuna dashboard``) is the tracker. ``MLflowTrackerConfig`` becomes
optuna-integration's ``MLflowCallback`` (one MLflow run per candidate, in an experiment named
after the study) when ``optuna-integration`` and ``mlflow`` are installed; ``LoguruTrackerConfig``
points to the study with a warning; the disabled tracker does nothing.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from enum import Enum
from typing import Any, Literal

import optuna
from pydantic import BaseModel, ConfigDict

__all__ = [
    "BaseTracker",
    "DefaultTrackerConfig",
    "DisabledTrackerConfig",
    "LoguruTrackerConfig",
    "MLflowTrackerConfig",
    "TrackerConfig",
    "TrackerTypes",
    "mlflow_callback_kwargs",
    "tracker_callbacks",
]

TrialCallback = Callable[[optuna.Study, optuna.trial.FrozenTrial], None]
MLFLOW_MISSING = (
    "MLflowTrackerConfig needs optuna-integration and mlflow: "
    "pip install 'ciq-optuna[mlflow]' (or: pip install optuna-integration mlflow)"
)


class TrackerTypes(str, Enum):
    """CompileIQ's tracker kinds; ``DEFAULT`` is ``DISABLED``."""

    LOGURU = "loguru"
    MLFLOW = "mlflow"
    DISABLED = "disabled"
    DEFAULT = "disabled"

    def __str__(self) -> str:
        return str(self.value)


class TrackerConfig(BaseModel):
    """Base of the tracker configurations (extra fields are kept, as in CompileIQ)."""

    model_config = ConfigDict(extra="allow")

    type: TrackerTypes
    enqueue: bool = True


class DisabledTrackerConfig(TrackerConfig):
    """No tracking beyond the Optuna study (the default)."""

    type: Literal[TrackerTypes.DISABLED] = TrackerTypes.DISABLED


class DefaultTrackerConfig(DisabledTrackerConfig):
    """The default tracker: disabled."""


class LoguruTrackerConfig(TrackerConfig):
    """CompileIQ's loguru logging; here the Optuna study holds what it would have logged."""

    model_config = ConfigDict(extra="allow", arbitrary_types_allowed=True)

    type: Literal[TrackerTypes.LOGURU] = TrackerTypes.LOGURU
    sink: Any = None
    level: str = "INFO"
    format: str = "{time} | {level} | {extra[task_id]} | {message}"


class MLflowTrackerConfig(TrackerConfig):
    """MLflow tracking, through optuna-integration's ``MLflowCallback``."""

    type: Literal[TrackerTypes.MLFLOW] = TrackerTypes.MLFLOW
    experiment_name: str | None = None
    run_name: str | None = None
    tracking_uri: str | None = None
    description: str | None = None
    score_names: list[str] = []
    log_config: bool = True


class BaseTracker:
    """CompileIQ's tracker interface, for imports; ``Search`` does not call these hooks.

    To act on each evaluated candidate, pass ``Search(..., callbacks=[fn])``: ``fn(study,
    frozen_trial)`` runs after each candidate is told, as Optuna's ``optimize`` callbacks do.
    """

    def __init__(self, tracker_config: TrackerConfig) -> None:
        self.tracker_type = tracker_config.type
        self.tracker_config = tracker_config.model_copy()
        self.setup()

    def setup(self, **kwargs: Any) -> None:
        """Prepare the tracker."""

    def cleanup(self, **kwargs: Any) -> None:
        """Release the tracker's resources."""

    def search_starts(self, **kwargs: Any) -> None:
        """Before the first generation."""

    def search_ends(self, **kwargs: Any) -> None:
        """After the last generation."""

    def generation_starts(self, generation_number: int, **kwargs: Any) -> None:
        """Before a generation."""

    def generation_ends(self, generation_number: int, **kwargs: Any) -> None:
        """After a generation."""

    def pre_objective(self, config: Any, **kwargs: Any) -> None:
        """Before one evaluation."""

    def post_objective(self, scores: Any, **kwargs: Any) -> None:
        """After one evaluation."""


def mlflow_callback_kwargs(config: MLflowTrackerConfig, num_objectives: int) -> dict[str, Any]:
    """``MLflowCallback`` arguments for an ``MLflowTrackerConfig``.

    Metrics are named ``score_1..N`` (or ``score_names`` when it has one name per objective);
    ``description`` goes to each run; ``log_config`` tags each run with the trial's user
    attributes (``ciq.result`` holds the params the objective received).
    """
    names = list(config.score_names)
    if len(names) != num_objectives:
        names = [f"score_{i + 1}" for i in range(num_objectives)]
    return {
        "tracking_uri": config.tracking_uri,
        "metric_name": names[0] if num_objectives == 1 else names,
        "create_experiment": True,
        "mlflow_kwargs": {"description": config.description} if config.description else None,
        "tag_trial_user_attrs": config.log_config,
    }


def tracker_callbacks(tracker_config: Any, num_objectives: int) -> list[TrialCallback]:
    """The per-candidate callbacks that stand for a CompileIQ tracker configuration."""
    kind = getattr(tracker_config, "type", None) if tracker_config is not None else TrackerTypes.DISABLED
    try:
        kind = TrackerTypes(str(kind))
    except ValueError:
        raise ValueError(
            f"unknown tracker_config type {kind!r}: use DisabledTrackerConfig, LoguruTrackerConfig "
            f"or MLflowTrackerConfig"
        ) from None
    if kind is TrackerTypes.DISABLED:
        return []
    if kind is TrackerTypes.LOGURU:
        warnings.warn(
            "LoguruTrackerConfig: ciq-optuna records every candidate in the Optuna study instead "
            "(search.study; trial attribute ciq.result); view it with optuna-dashboard STORAGE_URL "
            "(pass Search(storage=...)) or ciq-optuna dashboard",
            UserWarning,
            stacklevel=3,
        )
        return []
    if not isinstance(tracker_config, MLflowTrackerConfig):
        raise ValueError("an MLflow tracker_config must be an MLflowTrackerConfig")
    try:
        import mlflow  # noqa: F401
        from optuna_integration.mlflow import MLflowCallback
    except ImportError:
        raise ImportError(MLFLOW_MISSING) from None
    return [MLflowCallback(**mlflow_callback_kwargs(tracker_config, num_objectives))]
