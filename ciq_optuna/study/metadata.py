"""Studies of ciq-optuna: creation with the metadata workers need, resumption checks.

A tuning study carries, in the study user attribute ``ciq_optuna``, everything needed to
evaluate it anywhere: kernel (path and sha256), architecture, compiler name and version, space
identity, metrics and directions, measurement command, budget. Resuming or joining a study
with a different kernel, compiler version or space is refused with one clear line.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import optuna

from ciq_optuna import __version__
from ciq_optuna.errors import CiqError
from ciq_optuna.study.budget import budget_status

ATTR = "ciq_optuna"
_CHECKED = (
    ("kernel", "sha256", "kernel content"),
    ("arch", None, "architecture"),
    ("compiler", "name", "compiler"),
    ("compiler", "version", "compiler version"),
    ("metrics", None, "metrics"),
    ("directions", None, "directions"),
)


def file_sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def kernel_stem(kernel: str | Path, arch: str) -> str:
    """The kernel's file stem without a trailing ``.<arch>`` (``gemm.sm_90a.ptx`` -> ``gemm``)."""
    return Path(kernel).stem.removesuffix(f".{arch}")


def default_study_name(kernel: Path, arch: str, compiler: str, release: str, metrics: list[str]) -> str:
    """A readable, stable name: one study per kernel, target, compiler release and objective."""
    return f"{kernel_stem(kernel, arch)}-{arch}-{compiler}{release}-{'+'.join(metrics)}"


def metadata(study: optuna.Study) -> dict[str, Any]:
    """The study's ciq-optuna metadata; CiqError if it was not made by ciq-optuna."""
    meta = study.user_attrs.get(ATTR)
    if not isinstance(meta, Mapping):
        raise CiqError(
            f"study {study.study_name!r} was not created by ciq-optuna tune (no {ATTR!r} attribute)"
        )
    return dict(meta)


def check_compatible(found: Mapping[str, Any], wanted: Mapping[str, Any], study_name: str) -> None:
    """CiqError naming the first difference between a study's metadata and this run's."""
    for key, sub, label in _CHECKED:
        a, b = found.get(key), wanted.get(key)
        if sub is not None:
            a = a.get(sub) if isinstance(a, Mapping) else None
            b = b.get(sub) if isinstance(b, Mapping) else None
        if a != b and key == "kernel":
            raise CiqError(
                f"the kernel changed since study {study_name!r} was made (content hash differs); "
                "use another --study name for the new version"
            )
        if a != b:
            raise CiqError(
                f"study {study_name!r} was made with {label} {a!r}, this run has {b!r}; "
                f"use another --study name (or the matching {label})"
            )
    spaces_a = [s.get("sha256") for s in found.get("spaces", [])]
    spaces_b = [s.get("sha256") for s in wanted.get("spaces", [])]
    if spaces_a != spaces_b:
        raise CiqError(
            f"study {study_name!r} was made with another version of the search space files; "
            f"use another --study name"
        )


def create_or_load(
    storage: optuna.storages.BaseStorage,
    study_name: str,
    meta: Mapping[str, Any],
    *,
    sampler: optuna.samplers.BaseSampler,
) -> tuple[optuna.Study, bool]:
    """Create the study, or load it and check it matches ``meta``; returns (study, created)."""
    directions = list(meta["directions"])
    try:
        study = optuna.load_study(study_name=study_name, storage=storage, sampler=sampler)
    except KeyError:
        study = None
    if study is not None:
        check_compatible(metadata(study), meta, study_name)
        return study, False
    study = optuna.create_study(
        study_name=study_name, storage=storage, sampler=sampler, directions=directions, load_if_exists=True
    )
    if ATTR in study.user_attrs:  # another worker created it between our load and create
        check_compatible(metadata(study), meta, study_name)
        return study, False
    study.set_user_attr(ATTR, dict(meta, created_by=__version__))
    study.set_metric_names(list(meta["metrics"]))
    return study, True


def sampler_from_study(study: optuna.Study) -> optuna.samplers.BaseSampler:
    """The sampler a worker uses on a tuning study: the same kind and settings as the tune run's."""
    from ciq_optuna.samplers import make_sampler

    settings = metadata(study).get("sampler") or {}
    return make_sampler(len(study.directions), **settings)


def run_queued(
    study: optuna.Study, objective: Any, n_trials: int, *, catch: tuple[type[Exception], ...]
) -> list[optuna.trial.FrozenTrial]:
    """Evaluate the next ``n_trials`` trials (the queued ones first) one at a time; return them.

    Queued trials are run by a single thread: Optuna's queue races when several threads pick
    trials from it (a trial told twice).
    """
    ran: list[optuna.trial.FrozenTrial] = []
    study.optimize(objective, n_trials=n_trials, catch=catch, callbacks=[lambda _s, t: ran.append(t)])
    return ran


def finished_count(study: optuna.Study) -> int:
    """Trials that count against the budget, by the workers' rules (see :mod:`ciq_optuna.study.budget`)."""
    return budget_status(study)["done"]
