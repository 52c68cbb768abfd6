"""Application parameters: the user's own tunables (tile sizes, warps, stages) next to compiler controls.

A space is a nested dict. Leaves are Optuna distributions, the helpers below, a list (a
choice), or a plain value (a constant, not tuned). Nested keys become parameter names joined
with ``.``, e.g. ``{"tile": {"m": IntRange(16, 128, 16)}}`` -> ``tile.m``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import optuna
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)

from ciq_optuna.errors import CiqError

SEP = "."


def IntRange(low: int, high: int, step: int = 1, log: bool = False) -> IntDistribution:  # noqa: N802
    """Integers ``low..high`` (inclusive) by ``step``, or log-uniform when ``log``."""
    return IntDistribution(low, high, step=step, log=log)


def FloatRange(low: float, high: float, step: float | None = None, log: bool = False) -> FloatDistribution:  # noqa: N802
    """Floats in ``[low, high]``, optionally on a ``step`` grid or log-uniform."""
    return FloatDistribution(low, high, step=step, log=log)


def Choice(values: list[Any]) -> CategoricalDistribution:  # noqa: N802
    """One of ``values`` (ints, floats, strings, booleans or None)."""
    return CategoricalDistribution(list(values))


@dataclass(frozen=True)
class Const:
    """A constant passed to the objective but not tuned."""

    value: Any


def _leaf(value: Any, path: str) -> BaseDistribution | Const:
    if isinstance(value, (BaseDistribution, Const)):
        return value
    if isinstance(value, (list, tuple)):
        if not value:
            raise CiqError(f"application parameter {path!r}: an empty list has nothing to choose from")
        return CategoricalDistribution(list(value))
    if value is None or isinstance(value, (bool, int, float, str)):
        return Const(value)
    raise CiqError(f"application parameter {path!r}: unsupported value {value!r}")


class AppSpace:
    """A nested dict of application parameters, flattened to Optuna parameters."""

    def __init__(self, spec: Mapping[str, Any] | None = None) -> None:
        self.spec = dict(spec or {})
        self.leaves: dict[str, BaseDistribution | Const] = {}
        self._flatten(self.spec, "")

    def _flatten(self, node: Mapping[str, Any], prefix: str) -> None:
        for key, value in node.items():
            if not isinstance(key, str) or not key or SEP in key:
                raise CiqError(f"application parameter key {key!r}: use non-empty strings without {SEP!r}")
            path = f"{prefix}{SEP}{key}" if prefix else key
            if isinstance(value, Mapping):
                self._flatten(value, path)
            else:
                self.leaves[path] = _leaf(value, path)

    def distributions(self) -> dict[str, BaseDistribution]:
        """The tuned parameters, by flat name."""
        return {k: v for k, v in self.leaves.items() if isinstance(v, BaseDistribution)}

    def suggest(self, trial: optuna.Trial) -> dict[str, Any]:
        """Draw every parameter and return the nested dict the user's code receives."""
        flat = {}
        for name, leaf in self.leaves.items():
            flat[name] = leaf.value if isinstance(leaf, Const) else suggest_distribution(trial, name, leaf)
        return unflatten(flat)

    def from_params(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """The nested dict held in a trial's parameters (constants filled in)."""
        flat = {
            n: (leaf.value if isinstance(leaf, Const) else params[n])
            for n, leaf in self.leaves.items()
            if isinstance(leaf, Const) or n in params
        }
        return unflatten(flat)


def unflatten(flat: Mapping[str, Any]) -> dict[str, Any]:
    """``{"a.b": 1}`` -> ``{"a": {"b": 1}}``."""
    out: dict[str, Any] = {}
    for path, value in flat.items():
        node = out
        *parents, last = path.split(SEP)
        for p in parents:
            node = node.setdefault(p, {})
        node[last] = value
    return out


def suggest_distribution(trial: optuna.Trial, name: str, dist: BaseDistribution) -> Any:
    """Suggest ``name`` from an Optuna distribution through the public trial API."""
    if isinstance(dist, IntDistribution):
        return trial.suggest_int(name, dist.low, dist.high, step=dist.step, log=dist.log)
    if isinstance(dist, FloatDistribution):
        return trial.suggest_float(name, dist.low, dist.high, step=dist.step, log=dist.log)
    if isinstance(dist, CategoricalDistribution):
        return trial.suggest_categorical(name, dist.choices)
    raise CiqError(f"parameter {name!r}: unsupported distribution {dist!r}")
