"""One search space for a study: application parameters plus compiler controls."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import optuna
from optuna.distributions import BaseDistribution

from ciq_optuna.errors import CiqError
from ciq_optuna.space.app import AppSpace
from ciq_optuna.space.compiler_space import CompilerSpace


@dataclass
class Candidate:
    """What one trial evaluates: application values, compiler configurations and their flags."""

    app: dict[str, Any] = field(default_factory=dict)
    controls: dict[str, dict[str, Any]] = field(default_factory=dict)
    flags: dict[str, list[str]] = field(default_factory=dict)

    def all_flags(self) -> list[str]:
        """Every compiler flag, spaces in order."""
        return [f for flags in self.flags.values() for f in flags]


class SearchSpace:
    """Application parameters (nested dict) and compiler spaces, suggested together in one trial.

    Compiler parameters are named ``<space name>.<control>``; application parameters by their
    dotted path. The two must not collide.
    """

    def __init__(self, app: Mapping[str, Any] | None = None, compilers: Sequence[CompilerSpace] = ()) -> None:
        self.app = AppSpace(app)
        self.compilers = list(compilers)
        names = [c.name for c in self.compilers]
        if len(set(names)) != len(names):
            raise CiqError(f"compiler spaces must have distinct names, got {names}")
        clash = [k for k in self.app.leaves if k.split(".")[0] in names]
        if clash:
            raise CiqError(f"application parameters {clash} collide with compiler space names {names}")

    def distributions(self) -> dict[str, BaseDistribution]:
        """Every gene (conditional compiler genes included), by parameter name."""
        out = dict(self.app.distributions())
        for space in self.compilers:
            out.update(space.distributions())
        return out

    def size(self) -> int:
        """Number of distinct points, counting each gene's states (an upper bound with conditions)."""
        total = 1
        for dist in self.distributions().values():
            total *= _states(dist)
        return total

    def suggest(self, trial: optuna.Trial) -> Candidate:
        app = self.app.suggest(trial)
        return self._candidate(app, {s.name: s.suggest(trial) for s in self.compilers})

    def candidate_from_params(self, params: Mapping[str, Any]) -> Candidate:
        """The candidate held in a finished trial's parameters."""
        return self._candidate(
            self.app.from_params(params), {s.name: s.config_from_params(params) for s in self.compilers}
        )

    def baseline_params(self) -> dict[str, Any]:
        """Parameters of the compiler-default configuration (no application values), for enqueueing."""
        params: dict[str, Any] = {}
        for space in self.compilers:
            params.update(space.params_from_config(space.baseline()))
        return params

    def _candidate(self, app: dict[str, Any], configs: dict[str, dict[str, Any]]) -> Candidate:
        by_name = {s.name: s for s in self.compilers}
        flags = {name: by_name[name].render(cfg) for name, cfg in configs.items()}
        return Candidate(app=app, controls=configs, flags=flags)


def _states(dist: BaseDistribution) -> int:
    if isinstance(dist, optuna.distributions.CategoricalDistribution):
        return len(dist.choices)
    if isinstance(dist, optuna.distributions.IntDistribution):
        return (dist.high - dist.low) // dist.step + 1
    if isinstance(dist, optuna.distributions.FloatDistribution) and dist.step:
        return int(round((dist.high - dist.low) / dist.step)) + 1
    return 1000
