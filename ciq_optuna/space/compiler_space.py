"""A compiler's search space, loaded from a data file in ``spaces/``.

The space is the one place that knows which controls exist, when a control matters (its
conditions on earlier controls), which combinations the compiler rejects (conflicts), and how a
configuration becomes flags. A configuration is a dict ``control name -> value`` holding the
controls that were suggested (conditions held); values may be ``NOT_PASSED``.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import optuna
from optuna.distributions import BaseDistribution

from ciq_optuna.errors import CiqError, read_text
from ciq_optuna.space.controls import NOT_PASSED, Control, control_from_table, parse_arch

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["NOT_PASSED", "CompilerSpace", "Conflict"]

SCHEMA_VERSION = 1
_TOP_KEYS = {"schema", "name", "compiler", "cuda", "version", "description", "control", "conflict"}


@dataclass(frozen=True)
class Conflict:
    """A combination of control values the compiler rejects ("error") or ignores ("ignored")."""

    when: Mapping[str, Any]
    effect: str
    message: str


@dataclass(frozen=True)
class CompilerSpace:
    """The controls of one compiler version, in file order (parents before children)."""

    name: str
    compiler: str
    cuda: str
    version: int
    description: str
    controls: tuple[Control, ...]
    conflicts: tuple[Conflict, ...] = ()
    sha256: str = ""
    path: Path | None = None
    arch: str | None = None
    _by_name: dict[str, Control] = field(default_factory=dict, repr=False, compare=False)

    # -- loading ----------------------------------------------------------------------------
    @classmethod
    def load(cls, path: str | Path) -> CompilerSpace:
        """Read and check a space file; CiqError with the file and the problem if malformed."""
        path = Path(path)
        return cls.from_text(read_text(path, "space file"), path=path)

    @classmethod
    def from_text(cls, text: str, *, path: Path | None = None) -> CompilerSpace:
        where = str(path) if path else "space"
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise CiqError(f"{where}: not valid TOML: {exc}") from None
        return cls.from_dict(data, path=path)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, path: Path | None = None) -> CompilerSpace:
        where = str(path) if path else "space"
        unknown = set(data) - _TOP_KEYS
        if unknown:
            raise CiqError(f"{where}: unknown top-level key(s) {sorted(unknown)}")
        if data.get("schema") != SCHEMA_VERSION:
            raise CiqError(f"{where}: schema must be {SCHEMA_VERSION}, got {data.get('schema')!r}")
        for key in ("name", "compiler", "cuda"):
            if not isinstance(data.get(key), str) or not data[key]:
                raise CiqError(f"{where}: {key!r} must be a non-empty string")
        if not isinstance(data.get("version"), int):
            raise CiqError(f"{where}: 'version' must be an integer (the revision of this file)")
        tables = data.get("control")
        if not isinstance(tables, list) or not tables:
            raise CiqError(f"{where}: no [[control]] tables")
        controls: list[Control] = []
        seen: dict[str, Control] = {}
        for i, table in enumerate(tables):
            if not isinstance(table, Mapping):
                raise CiqError(f"{where}: control #{i + 1} is not a table")
            control = control_from_table(table, where)
            if control.name in seen:
                raise CiqError(f"{where}: control {control.name!r} is defined twice")
            for cond in (control.when, *control.when_any):
                _check_condition(cond, seen, f"{where}: control {control.name!r}")
            seen[control.name] = control
            controls.append(control)
        conflicts = []
        for i, table in enumerate(data.get("conflict", [])):
            cond = table.get("when") if isinstance(table, Mapping) else None
            effect = table.get("effect") if isinstance(table, Mapping) else None
            if not isinstance(cond, Mapping) or effect not in ("error", "ignored"):
                raise CiqError(f"{where}: conflict #{i + 1} needs a 'when' table and effect error|ignored")
            _check_condition(cond, seen, f"{where}: conflict #{i + 1}")
            conflicts.append(Conflict(dict(cond), effect, str(table.get("message", ""))))
        canonical = json.dumps(data, sort_keys=True, default=str).encode()
        return cls(
            name=data["name"],
            compiler=data["compiler"],
            cuda=data["cuda"],
            version=data["version"],
            description=str(data.get("description", "")).strip(),
            controls=tuple(controls),
            conflicts=tuple(conflicts),
            sha256=hashlib.sha256(canonical).hexdigest(),
            path=path,
            _by_name=seen,
        )

    # -- lookup -----------------------------------------------------------------------------
    def control(self, name: str) -> Control:
        try:
            return self._by_name[name]
        except KeyError:
            raise CiqError(f"space {self.name!r} has no control {name!r}") from None

    def for_arch(self, arch: str) -> CompilerSpace:
        """The space restricted to the controls that exist for ``arch``."""
        parse_arch(arch)
        kept = tuple(c for c in self.controls if c.applies_to(arch))
        return replace(self, controls=kept, arch=arch, _by_name={c.name: c for c in kept})

    @property
    def identity(self) -> dict[str, Any]:
        """What an ACF records to name this space."""
        return {
            "name": self.name,
            "compiler": self.compiler,
            "cuda": self.cuda,
            "version": self.version,
            "sha256": self.sha256,
        }

    # -- conditions -------------------------------------------------------------------------
    def is_active(self, control: Control, config: Mapping[str, Any]) -> bool:
        """True if ``control``'s conditions hold for the earlier controls in ``config``."""
        if not self._holds(control.when, config):
            return False
        return not control.when_any or any(self._holds(c, config) for c in control.when_any)

    def _holds(self, cond: Mapping[str, Any], config: Mapping[str, Any]) -> bool:
        for name, spec in cond.items():
            control = self._by_name.get(name)
            value = config.get(name)
            passed = control is not None and value is not None and control.is_passed(value)
            if spec == "passed":
                ok = passed
            elif spec == "not_passed":
                ok = not passed
            else:
                allowed = spec if isinstance(spec, list) else [spec]
                ok = any(
                    (a == "not_passed" and not passed)
                    or (passed and a == value and isinstance(a, bool) == isinstance(value, bool))
                    for a in allowed
                )
            if not ok:
                return False
        return True

    def conflicts_in(self, config: Mapping[str, Any]) -> list[Conflict]:
        """The declared conflicts that ``config`` runs into."""
        return [c for c in self.conflicts if self._holds(c.when, config)]

    # -- Optuna -----------------------------------------------------------------------------
    def distributions(self, prefix: str | None = None) -> dict[str, BaseDistribution]:
        """Every gene of the space (conditional ones included), by parameter name."""
        prefix = self.name if prefix is None else prefix
        out: dict[str, BaseDistribution] = {}
        for control in self.controls:
            out.update(control.genes(prefix))
        return out

    def suggest(self, trial: optuna.Trial, prefix: str | None = None) -> dict[str, Any]:
        """Draw a configuration define-by-run: a control is suggested only if its conditions hold."""
        prefix = self.name if prefix is None else prefix
        config: dict[str, Any] = {}
        for control in self.controls:
            if self.is_active(control, config):
                config[control.name] = control.suggest(trial, prefix)
        return config

    def config_from_params(self, params: Mapping[str, Any], prefix: str | None = None) -> dict[str, Any]:
        """The configuration held in a trial's parameters (the inverse of :meth:`suggest`)."""
        prefix = self.name if prefix is None else prefix
        config: dict[str, Any] = {}
        for control in self.controls:
            if self.is_active(control, config):
                value = control.from_params(params, prefix)
                if value is not None:
                    config[control.name] = value
        return config

    def params_from_config(self, config: Mapping[str, Any], prefix: str | None = None) -> dict[str, Any]:
        """Trial parameters for a configuration (for ``study.enqueue_trial``), checked."""
        prefix = self.name if prefix is None else prefix
        config = self.complete(config)
        params: dict[str, Any] = {}
        for name, value in config.items():
            params.update(self.control(name).to_params(value, prefix))
        return params

    def complete(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """Fill the active controls missing from ``config`` with their baseline state, and check it.

        Unknown controls, impossible values and values for controls whose conditions do not
        hold raise CiqError.
        """
        for name in config:
            self.control(name)
        full: dict[str, Any] = {}
        for control in self.controls:
            if self.is_active(control, full):
                value = config.get(control.name, control.baseline_value())
                control.check_value(value)
                full[control.name] = value
            elif control.name in config and control.is_passed(config[control.name]):
                raise CiqError(f"control {control.name!r} does not apply here: its conditions do not hold")
        return full

    def one_change_configs(self, max_states: int = 6) -> list[dict[str, Any]]:
        """The baseline with one control changed, for each state of each control active at the
        baseline that has at most ``max_states`` states (ints excluded), in file order.

        These are the cheapest informative candidates (is ``-O1`` alone better?); space files
        list the controls with the largest expected effect first.
        """
        base = self.baseline()
        out: list[dict[str, Any]] = []
        for control in self.controls:
            if (
                control.kind == "int"
                or not self.is_active(control, base)
                or len(control.values()) > max_states
            ):
                continue
            for value in control.values():
                if value == base.get(control.name) and isinstance(value, bool) == isinstance(
                    base.get(control.name), bool
                ):
                    continue
                out.append(
                    self.complete(
                        {**{k: v for k, v in base.items() if k != control.name}, control.name: value}
                    )
                )
        return out

    def baseline(self) -> dict[str, Any]:
        """The configuration that passes no flag where the compiler's default can be left alone."""
        return self.complete({})

    # -- flags ------------------------------------------------------------------------------
    def render(self, config: Mapping[str, Any]) -> list[str]:
        """Compiler flags for a configuration, in file order."""
        flags: list[str] = []
        for control in self.controls:
            if control.name in config:
                flags += control.render(config[control.name])
        return flags

    def passed(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """Only the controls of ``config`` that put a flag on the command line."""
        return {k: v for k, v in config.items() if self.control(k).is_passed(v)}

    def satisfying_config(self, name: str, value: Any) -> dict[str, Any]:
        """``name`` set to ``value`` plus the fewest parent settings that make it active.

        Used by the validator to try each value of a control on the real compiler.
        """
        target = self.control(name)
        partial: dict[str, Any] = {}
        if not self.is_active(target, self.baseline()):
            conds = [target.when] + ([target.when_any[0]] if target.when_any else [])
            for cond in conds:
                for parent, spec in cond.items():
                    partial[parent] = self._value_meeting(self.control(parent), spec)
        partial[name] = value
        return self.complete(partial)

    def _value_meeting(self, control: Control, spec: Any) -> Any:
        candidates = control.values()
        for v in candidates:
            if self._holds({control.name: spec}, {control.name: v}):
                return v
        raise CiqError(f"space {self.name!r}: no value of {control.name!r} meets {spec!r}")


def _check_condition(cond: Mapping[str, Any], known: Mapping[str, Control], where: str) -> None:
    if not isinstance(cond, Mapping):
        raise CiqError(f"{where}: a condition must be a table")
    for name, spec in cond.items():
        if name not in known:
            raise CiqError(f"{where}: condition on {name!r}, which is not defined earlier in the file")
        if spec in ("passed", "not_passed"):
            continue
        control = known[name]
        allowed = spec if isinstance(spec, list) else [spec]
        states = control.values()
        for a in allowed:
            if a != "not_passed" and not any(
                a == s and isinstance(a, bool) == isinstance(s, bool) for s in states
            ):
                raise CiqError(f"{where}: condition value {a!r} is not a state of {name!r}")
