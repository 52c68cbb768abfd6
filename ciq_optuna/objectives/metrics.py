"""Metrics read from a compile: names, meaning, and how they aggregate over a module's functions.

A module can hold several kernels; per-kernel numbers aggregate into one value per metric:
spills add up (every spilled byte costs), registers, stack and shared memory take the worst
kernel (occupancy is set per kernel, the worst one limits a fused pipeline).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ciq_optuna.errors import CiqError


@dataclass(frozen=True)
class Metric:
    name: str
    description: str
    unit: str
    extract: Callable[[Any], float]


def _entries(result: Any) -> list[Any]:
    funcs = list(result.functions.values())
    return [f for f in funcs if f.is_entry] or funcs


def _sum(field_name: str) -> Callable[[Any], float]:
    return lambda r: float(sum(getattr(f, field_name) or 0 for f in r.functions.values()))


def _max(field_name: str) -> Callable[[Any], float]:
    return lambda r: float(max((getattr(f, field_name) or 0 for f in _entries(r)), default=0))


def _constant(result: Any) -> float:
    return float(max((sum(f.constant_memory.values()) for f in _entries(result)), default=0))


COMPILE_METRICS: dict[str, Metric] = {
    m.name: m
    for m in [
        Metric("registers", "registers per thread (worst kernel)", "regs", _max("registers")),
        Metric(
            "spill-bytes",
            "spill stores + spill loads (all functions)",
            "B",
            lambda r: _sum("spill_stores")(r) + _sum("spill_loads")(r),
        ),
        Metric("spill-stores", "bytes of spill stores (all functions)", "B", _sum("spill_stores")),
        Metric("spill-loads", "bytes of spill loads (all functions)", "B", _sum("spill_loads")),
        Metric("stack", "stack frame per thread (worst kernel)", "B", _max("stack_frame")),
        Metric("shared", "static shared memory (worst kernel)", "B", _max("shared_memory")),
        Metric("constant", "constant memory, all banks (worst kernel)", "B", _constant),
        Metric("barriers", "named barriers (worst kernel)", "", _max("barriers")),
        Metric(
            "compile-time", "wall-clock time of the compiler process", "ms", lambda r: r.compile_time * 1000.0
        ),
        Metric("cubin-size", "size of the cubin file", "B", lambda r: float(len(r.cubin))),
    ]
}


def compile_metrics(result: Any) -> dict[str, float]:
    """Every compile metric of a successful compile."""
    return {name: m.extract(result) for name, m in COMPILE_METRICS.items()}


def check_metric_names(names: list[str], extra: list[str] = ()) -> None:
    """CiqError naming the known metrics if one of ``names`` is unknown."""
    known = list(COMPILE_METRICS) + list(extra)
    for name in names:
        if name not in known:
            raise CiqError(f"unknown metric {name!r}; known metrics: {', '.join(known)}")
