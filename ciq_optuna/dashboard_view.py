"""What ``ciq-optuna dashboard`` shows: the study as a person reads it, not as it is stored.

optuna-dashboard shows a study as stored. For a ciq-optuna study that hides what matters: the
trial page lists values without names ("Value 116, 0"), the compile metrics are one JSON blob in
the attribute box, every trial that compiled to a Pareto point's binary is a "Best Trial", and a
control that may be left out is two parameters (``X.passed`` and ``X``), so the parameter
importance splits the control in two. :class:`DashboardView` is the storage the dashboard reads
through; it changes only what is read:

- each trial's user attributes start with ``objectives`` (the values with their names and units),
  then one attribute per metric (a number: readable, a sortable column of the trial table, a
  choice of plot axis) in place of the ``metrics``/``measured`` blobs, and ``flags`` as one line;
- each control once: ``X.passed`` and ``X`` become ``X`` with ``(not passed)`` among its values;
- the study list names each study's objectives; the study's ``ciq_optuna`` record is one
  attribute per entry;
- "Best Trial" marks one trial per Pareto point (single objective: the winner), the trial ``tune``
  wrote the ACF for, chosen by :func:`ciq_optuna.summary.best_trials`'s order.

Every write goes to the storage unchanged. ``optuna-dashboard`` started directly on the same
storage shows the stored form; the study note (:func:`study_note`, written by ``tune``) explains it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, IntDistribution
from optuna.storages import BaseStorage
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial, TrialState

from ciq_optuna.errors import CiqError
from ciq_optuna.space.compiler_space import CompilerSpace
from ciq_optuna.space.controls import NOT_PASSED, PASSED_SUFFIX
from ciq_optuna.space.files import find_space
from ciq_optuna.study._optuna import FrozenStudy, non_domination_rank, study_id_of, trial_id_of
from ciq_optuna.study.metadata import ATTR as META_ATTR
from ciq_optuna.summary import best_trials, secondary_key, unit

#: The user attribute naming a trial's objective values (first in the trial's attribute box).
OBJECTIVES_ATTR = "objectives"
#: A value range larger than this is not merged with its ``.passed`` gene (too many choices).
MAX_MERGED_CHOICES = 512


def metric_label(name: str) -> str:
    """A metric with its unit, as the dashboard shows it: ``registers (regs)``."""
    u = unit(name)
    return f"{name} ({u})" if u else name


def _number(value: float) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _shown_value(value: Any) -> Any:
    """A metric as shown: whole numbers without ``.0``, others to 4 significant digits (a number
    still, so the dashboard sorts and plots it)."""
    if isinstance(value, float) and value == value and abs(value) != float("inf"):
        return int(value) if value.is_integer() else float(f"{value:.4g}")
    return value


def objectives_text(metrics: Sequence[str], values: Sequence[float] | None) -> str:
    """``registers 116 regs, spill-bytes 0 B``: the objective values with names and units."""
    if not values:
        return "not evaluated"
    parts = []
    for name, value in zip(metrics, values):
        u = unit(name)
        parts.append(f"{name} {_number(value)}{' ' + u if u else ''}")
    return ", ".join(parts)


def study_metrics(user_attrs: Mapping[str, Any]) -> list[str]:
    """The objective metric names recorded by ciq-optuna in a study's user attributes ([] if none)."""
    meta = user_attrs.get(META_ATTR)
    return list(meta.get("metrics", [])) if isinstance(meta, Mapping) else []


def readable_user_attrs(
    attrs: Mapping[str, Any], metrics: Sequence[str], values: Sequence[float] | None
) -> dict:
    """A trial's user attributes as shown: objectives first, one attribute per metric, flags as a line."""
    out: dict[str, Any] = {OBJECTIVES_ATTR: objectives_text(metrics, values)} if metrics else {}
    for blob in ("metrics", "measured"):
        if isinstance(attrs.get(blob), Mapping):
            for name, value in attrs[blob].items():
                out[metric_label(name)] = "missing" if value is None else _shown_value(value)
    for key, value in attrs.items():
        if key in ("metrics", "measured") and isinstance(value, Mapping):
            continue
        if key == "flags" and isinstance(value, list):
            value = " ".join(map(str, value)) or "(compiler defaults)"
        out[key] = value
    return out


def merged_distributions(
    trials: Sequence[FrozenTrial], known: Mapping[str, BaseDistribution] | None = None
) -> dict[str, BaseDistribution]:
    """For each control with a ``.passed`` gene: one categorical distribution over
    ``(not passed)`` and its values (a range too wide to list is left as two parameters).
    ``known``: every gene of the study's space (:func:`space_distributions`), so the merged form
    is the same from the first trial on; else the genes the trials show."""
    seen: dict[str, BaseDistribution] = {}
    gated: set[str] = set()
    for dists in [known or {}, *(t.distributions for t in trials)]:
        for name, dist in dists.items():
            if name.endswith(PASSED_SUFFIX):
                gated.add(name[: -len(PASSED_SUFFIX)])
            else:
                seen.setdefault(name, dist)
    merged: dict[str, BaseDistribution] = {}
    for name in gated:
        dist = seen.get(name)
        if isinstance(dist, CategoricalDistribution):
            choices = list(dist.choices)
        elif isinstance(dist, IntDistribution) and not dist.log:
            if (dist.high - dist.low) // dist.step >= MAX_MERGED_CHOICES:
                continue
            choices = list(range(dist.low, dist.high + 1, dist.step))
        else:
            continue
        merged[name] = CategoricalDistribution([NOT_PASSED, *choices])
    return merged


def space_distributions(user_attrs: Mapping[str, Any]) -> dict[str, BaseDistribution]:
    """Every gene of the compiler spaces a ciq-optuna study records (the files it names, when
    they are here and unchanged); {} when they cannot be loaded."""
    meta = user_attrs.get(META_ATTR)
    out: dict[str, BaseDistribution] = {}
    try:
        for ident in meta["spaces"]:
            path = Path(ident["path"]) if ident.get("path") and Path(ident["path"]).is_file() else None
            space = CompilerSpace.load(path or find_space(ident["compiler"], ident["cuda"]))
            if space.sha256 != ident["sha256"]:
                return {}
            out.update(space.for_arch(meta["arch"]).distributions())
    except (CiqError, KeyError, TypeError, OSError):
        return {}
    return out


def merge_controls(trial: FrozenTrial, merged: Mapping[str, BaseDistribution]) -> tuple[dict, dict]:
    """The trial's parameters and distributions with each merged control once."""
    params, dists = dict(trial.params), dict(trial.distributions)
    for name, dist in merged.items():
        gene = name + PASSED_SUFFIX
        if gene not in params:
            continue
        passed = params.pop(gene)
        dists.pop(gene, None)
        params[name] = params.get(name, NOT_PASSED) if passed else NOT_PASSED
        dists[name] = dist
    return params, dists


def pareto_points(trials: Sequence[FrozenTrial], directions: Sequence[StudyDirection]) -> list[FrozenTrial]:
    """One complete trial per Pareto point, the first by :func:`ciq_optuna.summary.secondary_key`
    (the one ``tune`` writes the ACF for); the dashboard's own front marks every trial with equal
    values (each binary is reached by many flag sets)."""
    complete = [t for t in trials if t.state == TrialState.COMPLETE and t.values is not None]
    if not complete:
        return []
    signs = [1.0 if d == StudyDirection.MINIMIZE else -1.0 for d in directions]
    ranks = non_domination_rank(np.array([[s * v for s, v in zip(signs, t.values)] for t in complete]))
    front = [t for t, r in zip(complete, ranks) if r == 0]
    simplest: dict[tuple[float, ...], FrozenTrial] = {}
    for t in sorted(front, key=secondary_key):
        simplest.setdefault(tuple(t.values), t)
    return sorted(simplest.values(), key=lambda t: t.number)


class DashboardView(BaseStorage):
    """A storage that forwards every call to ``backend`` and shows ciq-optuna studies readably
    (see the module docstring)."""

    def __init__(self, backend: BaseStorage) -> None:
        self.backend = backend
        self._lock = threading.Lock()
        #: Finished trials already shown, by trial id, with the merged names they were shown with.
        self._shown: dict[int, tuple[frozenset, FrozenTrial]] = {}
        self._space_genes: dict[int, dict[str, BaseDistribution]] = {}

    # ---- reads that change
    def get_all_studies(self) -> list[FrozenStudy]:
        shown = []
        for s in sorted(self.backend.get_all_studies(), key=study_id_of):
            metrics = study_metrics(s.user_attrs)
            name = s.study_name
            if metrics:
                dirs = ", ".join(
                    f"{'min' if d == StudyDirection.MINIMIZE else 'max'} {metric_label(m)}"
                    for m, d in zip(metrics, s.directions)
                )
                name = f"{name} · {dirs}"
            shown.append(
                FrozenStudy(
                    study_name=name,
                    direction=None,
                    directions=s.directions,
                    user_attrs=_flat_study_attrs(s.user_attrs),
                    system_attrs=s.system_attrs,
                    study_id=study_id_of(s),
                )
            )
        return shown

    def get_all_trials(
        self, study_id: int, deepcopy: bool = True, states: Sequence[TrialState] | None = None
    ) -> list[FrozenTrial]:
        trials = self.backend.get_all_trials(study_id, deepcopy=False, states=states)
        metrics = study_metrics(self.backend.get_study_user_attrs(study_id))
        if not metrics:
            return trials
        merged = merged_distributions(trials, self._genes(study_id))
        key = frozenset(merged)
        with self._lock:
            out = []
            for t in trials:
                cached = self._shown.get(trial_id_of(t))
                if cached is not None and cached[0] == key:
                    out.append(cached[1])
                    continue
                shown = self._readable(t, metrics, merged)
                if t.state.is_finished():
                    self._shown[trial_id_of(t)] = (key, shown)
                out.append(shown)
        return out

    def get_trial(self, trial_id: int) -> FrozenTrial:
        return self.backend.get_trial(trial_id)  # the dashboard reads only its artifacts this way

    def get_best_trial(self, study_id: int) -> FrozenTrial:
        if not study_metrics(self.backend.get_study_user_attrs(study_id)):
            return self.backend.get_best_trial(study_id)
        study = optuna.load_study(
            study_name=self.backend.get_study_name_from_id(study_id), storage=self.backend
        )
        best = best_trials(study)
        if not best:
            return self.backend.get_best_trial(study_id)
        return self._readable(
            best[0],
            study_metrics(study.user_attrs),
            merged_distributions(
                self.backend.get_all_trials(study_id, deepcopy=False), self._genes(study_id)
            ),
        )

    def _genes(self, study_id: int) -> dict[str, BaseDistribution]:
        """The study's space genes, loaded once per study."""
        if study_id not in self._space_genes:
            self._space_genes[study_id] = space_distributions(self.backend.get_study_user_attrs(study_id))
        return self._space_genes[study_id]

    @staticmethod
    def _readable(
        trial: FrozenTrial, metrics: Sequence[str], merged: Mapping[str, BaseDistribution]
    ) -> FrozenTrial:
        params, dists = merge_controls(trial, merged)
        return FrozenTrial(
            number=trial.number,
            state=trial.state,
            value=None,
            values=trial.values,
            datetime_start=trial.datetime_start,
            datetime_complete=trial.datetime_complete,
            params=params,
            distributions=dists,
            user_attrs=readable_user_attrs(trial.user_attrs, metrics, trial.values),
            system_attrs=trial.system_attrs,
            intermediate_values=trial.intermediate_values,
            trial_id=trial_id_of(trial),
        )

    # ---- everything else: the storage itself
    def create_new_study(self, directions: Sequence[StudyDirection], study_name: str | None = None) -> int:
        return self.backend.create_new_study(directions, study_name)

    def delete_study(self, study_id: int) -> None:
        self.backend.delete_study(study_id)

    def set_study_user_attr(self, study_id: int, key: str, value: Any) -> None:
        self.backend.set_study_user_attr(study_id, key, value)

    def set_study_system_attr(self, study_id: int, key: str, value: Any) -> None:
        self.backend.set_study_system_attr(study_id, key, value)

    def get_study_id_from_name(self, study_name: str) -> int:
        return self.backend.get_study_id_from_name(study_name)

    def get_study_name_from_id(self, study_id: int) -> str:
        return self.backend.get_study_name_from_id(study_id)

    def get_study_directions(self, study_id: int) -> list[StudyDirection]:
        return self.backend.get_study_directions(study_id)

    def get_study_user_attrs(self, study_id: int) -> dict[str, Any]:
        return self.backend.get_study_user_attrs(study_id)

    def get_study_system_attrs(self, study_id: int) -> dict[str, Any]:
        return self.backend.get_study_system_attrs(study_id)

    def create_new_trial(self, study_id: int, template_trial: FrozenTrial | None = None) -> int:
        return self.backend.create_new_trial(study_id, template_trial)

    def set_trial_param(
        self, trial_id: int, param_name: str, param_value_internal: float, distribution: BaseDistribution
    ) -> None:
        self.backend.set_trial_param(trial_id, param_name, param_value_internal, distribution)

    def set_trial_state_values(
        self, trial_id: int, state: TrialState, values: Sequence[float] | None = None
    ) -> bool:
        return self.backend.set_trial_state_values(trial_id, state, values)

    def set_trial_intermediate_value(self, trial_id: int, step: int, intermediate_value: float) -> None:
        self.backend.set_trial_intermediate_value(trial_id, step, intermediate_value)

    def set_trial_user_attr(self, trial_id: int, key: str, value: Any) -> None:
        self.backend.set_trial_user_attr(trial_id, key, value)

    def set_trial_system_attr(self, trial_id: int, key: str, value: Any) -> None:
        self.backend.set_trial_system_attr(trial_id, key, value)


def _flat_study_attrs(attrs: Mapping[str, Any]) -> dict[str, Any]:
    """Study user attributes with each dict-valued one spread out (one line per entry)."""
    out: dict[str, Any] = {}
    for key, value in attrs.items():
        if isinstance(value, Mapping):
            for sub, v in value.items():
                out[f"{key}.{sub}"] = v if isinstance(v, (str, int, float, bool)) else json.dumps(v)
        else:
            out[key] = value
    return out


def study_note(study: optuna.Study, acf_names: Mapping[int, str] | None = None) -> str:
    """The study note (Markdown) ``tune`` writes for the dashboard: the objectives, the Pareto
    points (or the winner) with their values named, and how to read the dashboard."""
    metrics = study_metrics(study.user_attrs)
    acf_names = acf_names or {}
    lines = [f"## {study.study_name}", ""]
    dirs = [d.name.lower() for d in study.directions]
    lines.append(
        "Objectives (in the order of a trial's *Value*): "
        + ", ".join(f"**{metric_label(m)}** ({d})" for m, d in zip(metrics, dirs))
        + "."
    )
    best = best_trials(study)
    if best:
        title = "Pareto front: one trial per point" if len(study.directions) > 1 else "The winner"
        lines += [
            "",
            f"### {title}",
            "",
            "| trial | " + " | ".join(metric_label(m) for m in metrics) + " | flags | ACF |",
        ]
        lines.append("|---" * (len(metrics) + 3) + "|")
        for t in best:
            flags = " ".join(t.user_attrs.get("flags", [])) or "(compiler defaults)"
            vals = " | ".join(_number(v) for v in t.values)
            lines.append(f"| {t.number} | {vals} | `{flags}` | {acf_names.get(t.number, '')} |")
    lines += [
        "",
        "### Reading this dashboard",
        "",
        "- `ciq-optuna dashboard` shows each trial's objectives by name (user attribute "
        "`objectives`) and one user attribute per metric; *Best Trial* marks the trials above only "
        "(trials that compiled to the same binary have the same values).",
        "- A control that may be left out is stored as two parameters, `NAME.passed` (is the flag "
        "given?) and `NAME` (its value). `ciq-optuna dashboard` shows it once, with `(not passed)` "
        "among its values, so *Hyperparameter Importance* ranks the control; in plain "
        "`optuna-dashboard`, add the importances of `NAME.passed` and `NAME`.",
    ]
    return "\n".join(lines) + "\n"
