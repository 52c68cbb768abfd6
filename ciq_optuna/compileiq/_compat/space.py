"""A CompileIQ search space as Optuna genes: suggest a candidate in a trial, in the shape the
objective receives (a nested dict, a hex string for a compiler space, or a list of those).

Parameter names: a dict leaf is its key path joined with ``.`` (``tile.m``); its knockout gene is
``<name>.__present__``; entries of a list space are prefixed ``<index>:``, compiler spaces keep
their own names (``ptxas.opt_level``).
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna

from ciq_optuna.compileiq._compat.legacy_dna import LegacyDna, load_legacy_dna
from ciq_optuna.compileiq.search_spaces.base import (
    ChoiceParamConfig,
    LiteralParamConfig,
    ParamConfig,
    RangeParamConfig,
)
from ciq_optuna.space.compiler_space import CompilerSpace

PRESENT = ".__present__"


@dataclass(frozen=True)
class _Leaf:
    path: tuple[Any, ...]
    name: str
    config: ParamConfig


class DictEntry:
    """A (nested) dict of DSL parameters."""

    def __init__(self, space: Mapping[Any, Any], prefix: str = "") -> None:
        self.leaves: list[_Leaf] = []
        self.empty_dicts: list[tuple[Any, ...]] = []
        self._walk(space, (), prefix)
        names = [leaf.name for leaf in self.leaves]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"search-space keys {sorted(dup)} collide once nested keys are joined with '.'")

    def _walk(self, node: Mapping[Any, Any], path: tuple[Any, ...], prefix: str) -> None:
        for key, value in node.items():
            here = (*path, key)
            if isinstance(value, Mapping):
                if value:
                    self._walk(value, here, prefix)
                else:
                    self.empty_dicts.append(here)
            elif isinstance(value, ParamConfig):
                self.leaves.append(_Leaf(here, prefix + ".".join(str(k) for k in here), value))
            else:
                where = "".join(f"[{k!r}]" for k in here)
                raise ValueError(
                    f"search_space{where} = {value!r} is not a search-space parameter: "
                    f"use range(), choice(), literal() or log_sampling() from ciq_optuna.compileiq.search_spaces.base"
                )

    def suggest(self, trial: optuna.Trial) -> dict[Any, Any]:
        out: dict[Any, Any] = {}
        for path in self.empty_dicts:
            _put(out, path, {})
        for leaf in self.leaves:
            cfg = leaf.config
            if cfg.knockout_threshold is not None and not trial.suggest_categorical(
                leaf.name + PRESENT, [True, False]
            ):
                continue
            _put(out, leaf.path, _suggest_value(trial, leaf.name, cfg))
        return out

    def initial(self, rng: random.Random, seeded_share: float) -> dict[str, Any]:
        """Fixed genes for a first-generation candidate: knockout priors and seed windows."""
        fixed: dict[str, Any] = {}
        for leaf in self.leaves:
            cfg = leaf.config
            if cfg.knockout_threshold is not None:
                present = rng.random() < cfg.knockout_threshold
                fixed[leaf.name + PRESENT] = present
                if not present:
                    continue
            if isinstance(cfg, RangeParamConfig) and (cfg.seed_low is not None or cfg.seed_high is not None):
                if rng.random() < seeded_share:
                    lo = cfg.low if cfg.seed_low is None else cfg.seed_low
                    hi = cfg.high if cfg.seed_high is None else cfg.seed_high
                    window = [v for v in cfg.values() if lo <= v <= hi] or [cfg.snap(lo)]
                    fixed[leaf.name] = rng.choice(window)
        return fixed


def _suggest_value(trial: optuna.Trial, name: str, cfg: ParamConfig) -> Any:
    if isinstance(cfg, LiteralParamConfig):
        return cfg.value
    if isinstance(cfg, ChoiceParamConfig):
        return trial.suggest_categorical(name, cfg.vals)
    assert isinstance(cfg, RangeParamConfig)
    if cfg.is_int:
        return trial.suggest_int(name, cfg.low, cfg.last, step=cfg.step)
    if cfg.last == cfg.low:
        return trial.suggest_float(name, cfg.low, cfg.low)
    return cfg.snap(trial.suggest_float(name, float(cfg.low), float(cfg.last), step=float(cfg.step)))


def _put(out: dict[Any, Any], path: tuple[Any, ...], value: Any) -> None:
    node = out
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = value


class CompilerEntry:
    """A compiler space: the candidate is the hex of its options-file text."""

    def __init__(self, space: CompilerSpace, prefix: str | None = None) -> None:
        self.space = space
        self.prefix = prefix

    def suggest(self, trial: optuna.Trial) -> str:
        return options_text(self.flags(self.space.suggest(trial, self.prefix))).encode().hex()

    def flags(self, config: Mapping[str, Any]) -> list[str]:
        return self.space.render(config)

    def initial(self, rng: random.Random, seeded_share: float) -> dict[str, Any]:
        return {}


class LegacyDnaEntry:
    """A legacy DNA ``.config`` space: one gene per parameter; knockout genes are on/off genes
    (True: their linked genes are present)."""

    def __init__(self, dna: LegacyDna, prefix: str = "") -> None:
        self.dna = dna
        self.prefix = prefix

    def suggest(self, trial: optuna.Trial) -> Any:
        genes = self.dna.genes
        knocked: set[str] = set()
        for g in genes:
            if g.param is None and not trial.suggest_categorical(self.prefix + g.name, [True, False]):
                knocked.update(g.linked)
        values = {
            g.name: _suggest_value(trial, self.prefix + g.name, g.param)
            for g in genes
            if g.param is not None and g.name not in knocked
        }
        return self.dna.render(values, set(values))

    def initial(self, rng: random.Random, seeded_share: float) -> dict[str, Any]:
        """Knockout genes start on with their class's ``threshold`` probability."""
        return {self.prefix + g.name: rng.random() < g.threshold for g in self.dna.genes if g.param is None}


def options_text(flags: list[str]) -> str:
    """An options file for ``--options-file``: the flags separated by spaces (no quoting needed)."""
    return " ".join(flags)


class SpacePlan:
    """The resolved search space: one or several entries, and how a trial becomes a candidate."""

    def __init__(self, search_space: Any) -> None:
        self.is_list = isinstance(search_space, (list, tuple))
        items = list(search_space) if self.is_list else [search_space]
        if self.is_list and not items:
            raise ValueError("search_space is an empty list")
        self.metadata: list[dict[str, Any]] = []
        self.entries: list[DictEntry | CompilerEntry | LegacyDnaEntry] = []
        seen: set[str] = set()
        for i, item in enumerate(items):
            resolved = _resolve(item, self.metadata)
            if isinstance(resolved, CompilerSpace):
                prefix = resolved.name if resolved.name not in seen else f"{i}:{resolved.name}"
                seen.add(resolved.name)
                self.entries.append(CompilerEntry(resolved, prefix))
            elif isinstance(resolved, LegacyDna):
                self.entries.append(LegacyDnaEntry(resolved, f"{i}:" if self.is_list else ""))
            else:
                self.entries.append(DictEntry(resolved, f"{i}:" if self.is_list else ""))

    @property
    def has_compiler(self) -> bool:
        """True when a compiler space is part of the search space."""
        return any(isinstance(e, CompilerEntry) for e in self.entries)

    @property
    def compiler_only(self) -> bool:
        """True for a single compiler space (the objective receives a hex string)."""
        return not self.is_list and isinstance(self.entries[0], CompilerEntry)

    def suggest(self, trial: optuna.Trial) -> Any:
        values = [e.suggest(trial) for e in self.entries]
        return values if self.is_list else values[0]

    def initial(self, rng: random.Random, seeded_share: float) -> dict[str, Any]:
        fixed: dict[str, Any] = {}
        for e in self.entries:
            fixed.update(e.initial(rng, seeded_share))
        return fixed

    def flags(self, candidate: Any) -> list[str] | None:
        """The compiler flags of a compiler-only candidate (None otherwise)."""
        if not self.compiler_only:
            return None
        return bytes.fromhex(candidate).decode().split()

    def describe(self) -> list[dict[str, Any]]:
        """A JSON-able description for the study's metadata."""
        out: list[dict[str, Any]] = []
        for e in self.entries:
            if isinstance(e, CompilerEntry):
                out.append({"compiler_space": e.space.name, "cuda": e.space.cuda, "sha256": e.space.sha256})
            elif isinstance(e, LegacyDnaEntry):
                out.append({"legacy_dna": str(e.dna.path), "genes": [g.name for g in e.dna.genes]})
            else:
                out.append({"params": [leaf.name for leaf in e.leaves]})
        return out


def _resolve(item: Any, metadata: list[dict[str, Any]]) -> Mapping[Any, Any] | CompilerSpace | LegacyDna:
    """A dict, a CompilerSpace, a provider (``.retrieve()``) or a path, resolved now."""
    if isinstance(item, str):
        item = Path(item)
    if isinstance(item, Mapping) or isinstance(item, CompilerSpace):
        return item
    if hasattr(item, "retrieve"):
        resolved = item.retrieve()
        metadata.append(dict(getattr(item, "metadata", {}) or {"provider": type(item).__name__}))
        return _resolve(resolved, [])
    if isinstance(item, Path):
        if not item.exists():
            raise FileNotFoundError(f"search space file not found: {item}")
        if item.suffix == ".toml":
            return CompilerSpace.load(item)
        if item.suffix == ".config":
            return load_legacy_dna(item)
        raise ValueError(
            f"{item}: CompileIQ's {item.suffix or 'binary'} search spaces are encrypted for NVIDIA's "
            f"engine; use PtxasSearchSpace()/NvccSearchSpace() or a ciq-optuna spaces/*.toml file"
        )
    raise ValueError(
        f"unsupported search_space of type {type(item).__name__}: expected a dict, a provider "
        f"such as PtxasSearchSpace(), a .toml or legacy DNA .config path, or a list of those"
    )
