"""Compiler controls: one class per kind of control.

A control knows its own states, how they become Optuna distributions ("genes"), how to read its
value back from a trial's parameters, and how a value renders as compiler flags. Samplers, the
ACF writer and the CLI ask the control; nothing else switches on the kind.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, IntDistribution

from ciq_optuna.errors import CiqError

NOT_PASSED = "(not passed)"
"""The categorical choice meaning "the flag is not given to the compiler"."""

PASSED_SUFFIX = ".passed"
"""Suffix of the on/off gene that decides whether an int control is passed at all."""

_NAME_RE = re.compile(r"^[a-z][a-z0-9_]*$")
_ARCH_RE = re.compile(r"^sm_(\d+)([a-z]?)(\+?)$")


def parse_arch(arch: str) -> tuple[int, str]:
    """Split ``sm_90a`` into ``(90, "a")``; raise CiqError for anything else."""
    m = _ARCH_RE.match(arch)
    if not m or m.group(3):
        raise CiqError(f"unknown architecture {arch!r}: expected sm_<number>[suffix], e.g. sm_80 or sm_90a")
    return int(m.group(1)), m.group(2)


def arch_matches(spec: str, arch: str) -> bool:
    """True if ``arch`` is covered by ``spec`` ("all", "sm_80", "sm_80+" or "sm_90a")."""
    if spec == "all":
        return True
    m = _ARCH_RE.match(spec)
    number, suffix = parse_arch(arch)
    if m.group(3):
        return number >= int(m.group(1))
    return number == int(m.group(1)) and suffix == m.group(2)


@dataclass(frozen=True)
class Control:
    """A compiler control read from a space file (base class; see the kinds below)."""

    kind: ClassVar[str] = ""
    name: str
    flag: str
    default: Any
    not_passed: bool
    description: str
    archs: tuple[str, ...] = ("all",)
    when: Mapping[str, Any] = field(default_factory=dict)
    when_any: tuple[Mapping[str, Any], ...] = ()

    # -- states ---------------------------------------------------------------------------
    def values(self) -> list[Any]:
        """Every state of the control, including NOT_PASSED where that is a state of its own."""
        raise NotImplementedError

    def is_passed(self, value: Any) -> bool:
        """True if ``value`` puts a flag on the command line."""
        return value is not None and value != NOT_PASSED

    def applies_to(self, arch: str) -> bool:
        """True if the control exists for this architecture."""
        return any(arch_matches(spec, arch) for spec in self.archs)

    def baseline_value(self) -> Any:
        """The state that reproduces the compiler's default behaviour with the fewest flags."""
        return NOT_PASSED if self.not_passed else self.default

    # -- flags ----------------------------------------------------------------------------
    def render(self, value: Any) -> list[str]:
        """Compiler flags for ``value`` (empty when not passed)."""
        if not self.is_passed(value):
            return []
        return self.flag.replace("{value}", self._format(value)).split()

    def _format(self, value: Any) -> str:
        return str(value)

    # -- Optuna ---------------------------------------------------------------------------
    def genes(self, prefix: str) -> dict[str, BaseDistribution]:
        """The Optuna distributions this control uses, by parameter name."""
        return {self.param_name(prefix): CategoricalDistribution(self.values())}

    def param_name(self, prefix: str) -> str:
        return f"{prefix}.{self.name}" if prefix else self.name

    def suggest(self, trial: optuna.Trial, prefix: str) -> Any:
        """Draw this control's value in ``trial`` (define-by-run)."""
        return trial.suggest_categorical(self.param_name(prefix), self.values())

    def from_params(self, params: Mapping[str, Any], prefix: str) -> Any:
        """The value held in a trial's ``params``; None when the control was not suggested."""
        return params.get(self.param_name(prefix))

    def to_params(self, value: Any, prefix: str) -> dict[str, Any]:
        """Trial parameters that make :meth:`from_params` return ``value`` (for enqueue_trial)."""
        return {self.param_name(prefix): value}

    def check_value(self, value: Any) -> None:
        """Raise CiqError if ``value`` is not a state of this control (True is not 1 here)."""
        if not any(v == value and isinstance(v, bool) == isinstance(value, bool) for v in self.values()):
            raise CiqError(f"control {self.name!r}: {value!r} is not one of {self.values()}")


@dataclass(frozen=True)
class SwitchControl(Control):
    """A flag that is present or absent, e.g. ``--use_fast_math``. False means not passed."""

    kind: ClassVar[str] = "switch"

    def values(self) -> list[Any]:
        return [False, True]

    def is_passed(self, value: Any) -> bool:
        return value is True

    def baseline_value(self) -> Any:
        return False

    def render(self, value: Any) -> list[str]:
        return self.flag.split() if value is True else []


@dataclass(frozen=True)
class BoolControl(Control):
    """A flag taking true/false, e.g. ``--fmad={value}``."""

    kind: ClassVar[str] = "bool"

    def values(self) -> list[Any]:
        return ([NOT_PASSED] if self.not_passed else []) + [True, False]

    def _format(self, value: Any) -> str:
        return "true" if value else "false"


@dataclass(frozen=True)
class ChoiceControl(Control):
    """A flag taking one of a list of values, e.g. ``-O{value}`` or ``-dlcm={value}``."""

    kind: ClassVar[str] = "choice"
    choices: tuple[Any, ...] = ()

    def values(self) -> list[Any]:
        return ([NOT_PASSED] if self.not_passed else []) + list(self.choices)


@dataclass(frozen=True)
class IntControl(Control):
    """An integer flag over ``low..high`` by ``step``, or over powers of two when ``log``.

    With a "not passed" state the control uses two genes: ``<name>.passed`` (False/True) and
    ``<name>`` (the value), the latter suggested only when passed, so the sampler sees a
    real integer range rather than a bag of unordered choices.
    """

    kind: ClassVar[str] = "int"
    low: int = 0
    high: int = 0
    step: int = 1
    log: bool = False

    def grid(self) -> list[int]:
        """Every integer value the control takes."""
        if self.log:
            lo, hi = int(math.log2(self.low)), int(math.log2(self.high))
            return [2**e for e in range(lo, hi + 1)]
        return list(range(self.low, self.high + 1, self.step))

    def values(self) -> list[Any]:
        return ([NOT_PASSED] if self.not_passed else []) + self.grid()

    def _value_distribution(self) -> BaseDistribution:
        if self.log:
            return CategoricalDistribution(self.grid())
        return IntDistribution(self.low, self.high, step=self.step)

    def genes(self, prefix: str) -> dict[str, BaseDistribution]:
        genes: dict[str, BaseDistribution] = {}
        if self.not_passed:
            genes[self.param_name(prefix) + PASSED_SUFFIX] = CategoricalDistribution([False, True])
        genes[self.param_name(prefix)] = self._value_distribution()
        return genes

    def suggest(self, trial: optuna.Trial, prefix: str) -> Any:
        name = self.param_name(prefix)
        if self.not_passed and not trial.suggest_categorical(name + PASSED_SUFFIX, [False, True]):
            return NOT_PASSED
        if self.log:
            return trial.suggest_categorical(name, self.grid())
        return trial.suggest_int(name, self.low, self.high, step=self.step)

    def from_params(self, params: Mapping[str, Any], prefix: str) -> Any:
        name = self.param_name(prefix)
        if self.not_passed:
            if name + PASSED_SUFFIX not in params:
                return None
            if not params[name + PASSED_SUFFIX]:
                return NOT_PASSED
        return params.get(name)

    def to_params(self, value: Any, prefix: str) -> dict[str, Any]:
        name = self.param_name(prefix)
        if not self.not_passed:
            return {name: value}
        if value == NOT_PASSED:
            return {name + PASSED_SUFFIX: False}
        return {name + PASSED_SUFFIX: True, name: value}


KINDS: dict[str, type[Control]] = {
    cls.kind: cls for cls in (SwitchControl, BoolControl, ChoiceControl, IntControl)
}

_COMMON_KEYS = {"name", "flag", "kind", "default", "not_passed", "archs", "description", "when", "when_any"}
_KIND_KEYS = {"switch": set(), "bool": set(), "choice": {"values"}, "int": {"low", "high", "step", "log"}}


def control_from_table(table: Mapping[str, Any], where: str) -> Control:
    """Build a control from one ``[[control]]`` table of a space file; CiqError if malformed."""
    name = table.get("name")
    where = f"{where}: control {name!r}" if name else where
    kind = table.get("kind")
    if kind not in KINDS:
        raise CiqError(f"{where}: kind must be one of {sorted(KINDS)}, got {kind!r}")
    unknown = set(table) - _COMMON_KEYS - _KIND_KEYS[kind]
    if unknown:
        raise CiqError(f"{where}: unknown key(s) {sorted(unknown)} for kind {kind!r}")
    for key in ("name", "flag", "description"):
        if not isinstance(table.get(key), str) or not table[key].strip():
            raise CiqError(f"{where}: {key!r} must be a non-empty string")
    if not _NAME_RE.match(name):
        raise CiqError(f"{where}: name must match [a-z][a-z0-9_]*")
    archs = table.get("archs", ["all"])
    if isinstance(archs, str):
        archs = [archs]
    for spec in archs:
        if spec != "all" and not _ARCH_RE.match(str(spec)):
            raise CiqError(f"{where}: unknown architecture spec {spec!r} (use all, sm_80, sm_80+, sm_90a)")
    when = table.get("when", {})
    when_any = table.get("when_any", [])
    if not isinstance(when, Mapping) or not isinstance(when_any, list):
        raise CiqError(f"{where}: 'when' must be a table and 'when_any' a list of tables")
    takes_value = "{value}" in table["flag"]
    if kind == "switch" and takes_value:
        raise CiqError(f"{where}: a switch flag has no {{value}}")
    if kind != "switch" and not takes_value:
        raise CiqError(f"{where}: the flag must contain {{value}}")
    not_passed = bool(table.get("not_passed", kind == "switch"))
    common = dict(
        name=name,
        flag=table["flag"],
        default=table.get("default"),
        not_passed=not_passed,
        description=table["description"].strip(),
        archs=tuple(archs),
        when=dict(when),
        when_any=tuple(dict(c) for c in when_any),
    )
    if kind == "choice":
        values = table.get("values")
        if not isinstance(values, list) or not values or len(set(map(repr, values))) != len(values):
            raise CiqError(f"{where}: 'values' must be a non-empty list of distinct values")
        control: Control = ChoiceControl(choices=tuple(values), **common)
    elif kind == "int":
        low, high, step, log = (
            table.get("low"),
            table.get("high"),
            table.get("step", 1),
            table.get("log", False),
        )
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (low, high, step)):
            raise CiqError(f"{where}: low, high and step must be integers")
        if not (low < high) or step < 1 or (high - low) % step:
            raise CiqError(f"{where}: need low < high, step >= 1 and (high - low) divisible by step")
        if log and (step != 1 or low < 1 or low & (low - 1) or high & (high - 1)):
            raise CiqError(f"{where}: a log int control takes powers of two for low and high, and no step")
        control = IntControl(low=low, high=high, step=step, log=bool(log), **common)
    else:
        control = KINDS[kind](**common)
    if control.default is None:
        raise CiqError(f"{where}: 'default' is required (what the compiler does when the flag is absent)")
    if kind in ("bool", "switch") and not isinstance(control.default, bool):
        raise CiqError(f"{where}: the default of a {kind} control is true or false")
    return control
