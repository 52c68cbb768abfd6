"""Warm-started re-tuning: seed a new study with the winners of earlier tunings and their neighbours.

After a compiler upgrade (or for a neighbouring architecture, or an edited kernel) the old
winner is usually close to the new one. :func:`warm_sources` finds the ACFs in a store made
for the same kernel name and objectives under another key; :func:`warm_configs` translates
their controls into the current space (controls the space no longer has, or values it no
longer accepts, are dropped) and adds their neighbours: the winner without each of its
controls, and each passed integer control one grid step up and down. :func:`run_warm_start`
evaluates them right after the baseline, one at a time (user attribute ``warm_start``: the
ACF it comes from); the tune's screening trials follow them, as in a cold tune.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import optuna
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)

from ciq_optuna.acf import Acf, read_acf
from ciq_optuna.errors import CiqError
from ciq_optuna.objectives.compile import TrialFailed
from ciq_optuna.simplify import without
from ciq_optuna.space.compiler_space import CompilerSpace
from ciq_optuna.space.controls import IntControl
from ciq_optuna.store import Store, StoreKey, kernel_stem
from ciq_optuna.study.metadata import run_queued

WARM_ATTR = "warm_start"


def warm_sources(store: Store, key: StoreKey, kernel_name: str, limit: int = 3) -> list[tuple[Path, Acf]]:
    """ACFs of the store that are worth seeding a tuning for ``key`` with, closest first.

    Same objectives and compiler name; then, in this order: same kernel and arch with another
    compiler version; same kernel name on another arch; same kernel name and arch with other
    content (an edited kernel). The entry for ``key`` itself is never a source.
    """
    if not store.root.is_dir():
        return []
    stem = kernel_stem(kernel_name, key.arch)
    ranked: list[tuple[int, str, Path, Acf]] = []
    for e in store.scan().entries:
        k = e.key
        if k == key or k.compiler != key.compiler or k.objectives != key.objectives:
            continue
        same_name = kernel_stem(str(e.acf.kernel.get("name", "")), k.arch) == stem
        if k.kernel_sha256 == key.kernel_sha256 and k.arch == key.arch:
            rank = 0
        elif same_name and k.arch != key.arch:
            rank = 1
        elif same_name and k.arch == key.arch:
            rank = 2
        else:
            continue
        ranked.append((rank, str(e.path), e.path, e.acf))
    ranked.sort(key=lambda r: (r[0], r[1]))
    return [(p, a) for _, _, p, a in ranked[:limit]]


def translate(space: CompilerSpace, controls: Mapping[str, Any]) -> dict[str, Any]:
    """An old winner's passed controls as a valid configuration of ``space``.

    Controls the space does not have (another release, another arch) and values it does not
    accept are dropped; so is any control whose conditions no longer hold.
    """
    config: dict[str, Any] = {}
    for name, value in controls.items():
        try:
            space.control(name).check_value(value)
        except (CiqError, KeyError):
            continue
        config[name] = value
    while True:
        try:
            return space.complete(config)
        except CiqError as exc:
            dropped = next((n for n in config if repr(n) in str(exc)), None)
            if dropped is None:
                return space.baseline()
            config.pop(dropped)


def neighbours(space: CompilerSpace, config: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The configuration without each passed control, and each passed int control one step up/down."""
    out: list[dict[str, Any]] = []
    passed = space.passed(config)
    for name, value in passed.items():
        control = space.control(name)
        if isinstance(control, IntControl):
            grid = control.grid()
            if value in grid:
                i = grid.index(value)
                for j in (i - 1, i + 1):
                    if 0 <= j < len(grid):
                        try:
                            out.append(space.complete({**passed, name: grid[j]}))
                        except CiqError:
                            pass
    for name in passed:
        out.append(without(space, config, name))
    return out


def warm_configs(space: CompilerSpace, sources: Sequence[Acf]) -> list[dict[str, Any]]:
    """Winners first (in source order), then their neighbours; no duplicates, no baseline."""
    winners = [translate(space, acf.controls.get(space.name, {})) for acf in sources]
    base = space.baseline()
    out: list[dict[str, Any]] = []
    seen = {_key(base)}
    for config in winners + [n for w in winners for n in neighbours(space, w)]:
        if _key(config) not in seen:
            seen.add(_key(config))
            out.append(config)
    return out


def run_warm_start(
    study: optuna.Study,
    spaces: Sequence[CompilerSpace],
    sources: Sequence[tuple[Path, Acf]],
    objective: Callable[[optuna.Trial], Any],
    count: int,
    app: Mapping[str, BaseDistribution] | None = None,
) -> int:
    """Enqueue and evaluate up to ``count`` warm-start candidates, one at a time; returns how many ran.

    Only on a study whose search has not started (nothing but the baseline), like screening.
    ``spaces`` must be a single compiler space (one compiler command per study). ``app``: the
    study's application parameters (a Triton kernel's meta-parameters); each source's tuned
    values that the distributions accept go with its candidates (the rest is sampled).
    """
    if count <= 0 or not sources or len(spaces) != 1:
        return 0
    if any(not t.user_attrs.get("baseline") for t in study.get_trials(deepcopy=False)):
        return 0
    space = spaces[0]
    chosen: list[tuple[dict[str, Any], dict[str, Any], str]] = []
    seen: set[tuple] = set()
    winners = set()
    for path, acf in sources:
        values = app_values(acf, app or {})
        winners.add((_key(translate(space, acf.controls.get(space.name, {}))), _key(values)))
        configs = warm_configs(space, [acf])
        if values and not configs:  # the defaults won the controls: the meta-parameters still count
            configs = [space.baseline()]
        for config in configs:
            if (_key(config), _key(values)) not in seen:
                seen.add((_key(config), _key(values)))
                chosen.append((config, values, str(path)))
    # winners of every source before any neighbour
    chosen.sort(key=lambda c: (_key(c[0]), _key(c[1])) not in winners)
    chosen = chosen[:count]
    for config, values, path in chosen:
        study.enqueue_trial({**values, **space.params_from_config(config)}, user_attrs={WARM_ATTR: path})
    if not chosen:
        return 0
    return len(run_queued(study, objective, len(chosen), catch=(TrialFailed,)))


def app_values(acf: Acf, app: Mapping[str, BaseDistribution]) -> dict[str, Any]:
    """The ACF's tuned application values (e.g. Triton meta-parameters) that ``app`` accepts."""
    out = {}
    for name, value in acf.application.items():
        dist = app.get(name)
        if isinstance(dist, CategoricalDistribution) and value in dist.choices:
            out[name] = value
        elif isinstance(dist, (IntDistribution, FloatDistribution)) and dist.low <= value <= dist.high:
            out[name] = value
    return out


def explicit_sources(paths: Sequence[Path]) -> list[tuple[Path, Acf]]:
    """ACFs named with ``--warm-from``, read and verified."""
    return [(Path(p), read_acf(p)) for p in paths]


def _key(config: Mapping[str, Any]) -> tuple:
    return tuple(sorted((k, repr(v)) for k, v in config.items()))


def find_warm_sources(config: Any, meta: Mapping[str, Any]) -> list[tuple[Path, Acf]]:
    """For ``tune``: the ACFs of ``--warm-from`` (read now, before any trial), then the store's
    nearest entries for this kernel (see :func:`warm_sources`) unless warm starting is off."""
    from ciq_optuna.store import key_for_meta

    sources = explicit_sources(getattr(config, "warm_from", []) or [])
    if getattr(config, "store", None) is not None and getattr(config, "warm_start", True):
        sources += warm_sources(Store(config.store), key_for_meta(meta), meta["kernel"]["name"])
    return sources


def warm_count(config: Any, remaining: int) -> int:
    """How many warm-start trials a tune runs: a quarter of the budget (at least 2), within what remains."""
    return min(remaining, max(2, config.trials // 4))
