"""The private Optuna names a sampler needs, in one place (the sampler layer cannot import
:mod:`ciq_optuna.study._optuna`, which re-exports these and lists them in its ``PRIVATE_NAMES``;
tests/test_optuna_private.py fails by name when an Optuna upgrade removes one).

Optuna gives a sampler no public way to reach the study's storage, ids, its once-per-trial read
of the trial list, or a trial's id; its own samplers use the same attributes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import optuna
from optuna.distributions import BaseDistribution
from optuna.study._multi_objective import _fast_non_domination_rank
from optuna.trial import FrozenTrial

#: Private Optuna names used through this module (instance attributes are checked on instances).
PRIVATE_NAMES = (
    "optuna.study.Study._storage",
    "optuna.study.Study._study_id",
    "optuna.study.Study._get_trials",
    "optuna.trial.Trial._trial_id",
    "optuna.trial.FrozenTrial._trial_id",
    "optuna.study._multi_objective._fast_non_domination_rank",
    "optuna.distributions.BaseDistribution._contains",
    "optuna.samplers.BaseGASampler._get_generation_key",
)


def storage_of(study: optuna.Study) -> optuna.storages.BaseStorage:
    """The storage behind ``study`` (``Study._storage``)."""
    return study._storage


def study_id_of(study: optuna.Study) -> int:
    """The storage's id of ``study`` (``Study._study_id``)."""
    return study._study_id


def trial_id_of(trial: optuna.Trial | FrozenTrial) -> int:
    """The storage's id of a trial (``_trial_id``), which its storage methods take."""
    return trial._trial_id


def cached_trials(study: optuna.Study) -> list[FrozenTrial]:
    """The study's trials as read once at the start of the current trial (no storage read when
    the sampler read them already); ``Study._get_trials(use_cache=True)``."""
    return study._get_trials(deepcopy=False, use_cache=True)


def non_domination_rank(values: np.ndarray) -> np.ndarray:
    """The Pareto rank of each row of ``values`` (all minimised), Optuna's own NSGA-II ranking."""
    return _fast_non_domination_rank(values)


def contains(distribution: BaseDistribution, value: Any) -> bool:
    """Whether ``value`` is one of ``distribution``'s values (``BaseDistribution._contains``)."""
    return distribution._contains(distribution.to_internal_repr(value))
