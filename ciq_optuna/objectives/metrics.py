"""Metrics read from a compile: names, meaning, and how they aggregate over a module's functions.

A module can hold several kernels; per-kernel numbers aggregate into one value per metric:
spills add up (every spilled byte costs), registers, stack and shared memory take the worst
kernel (occupancy is set per kernel, the worst one limits a fused pipeline). A metric that one
of the functions' reports lacks is None ("not measured"), never 0.
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
    extract: Callable[[Any], float | None]


def _entries(result: Any) -> list[Any]:
    funcs = list(result.functions.values())
    return [f for f in funcs if f.is_entry] or funcs


def _values(funcs: list[Any], field_name: str) -> list[float] | None:
    """The field of every function, or None when one function's report lacks it (not measured)."""
    values = [getattr(f, field_name) for f in funcs]
    if not values or any(v is None for v in values):
        return None
    return [float(v) for v in values]


def _sum(field_name: str) -> Callable[[Any], float | None]:
    def extract(r: Any) -> float | None:
        values = _values(list(r.functions.values()), field_name)
        return None if values is None else float(sum(values))

    return extract


def _max(field_name: str) -> Callable[[Any], float | None]:
    def extract(r: Any) -> float | None:
        values = _values(_entries(r), field_name)
        return None if values is None else max(values)

    return extract


def _spill_bytes(r: Any) -> float | None:
    stores, loads = _sum("spill_stores")(r), _sum("spill_loads")(r)
    return None if stores is None or loads is None else stores + loads


def _constant(result: Any) -> float | None:
    if _values(_entries(result), "registers") is None:  # the banks are printed on the Used line
        return None
    return float(max(sum(f.constant_memory.values()) for f in _entries(result)))


COMPILE_METRICS: dict[str, Metric] = {
    m.name: m
    for m in [
        Metric("registers", "registers per thread (worst kernel)", "regs", _max("registers")),
        Metric("spill-bytes", "spill stores + spill loads (all functions)", "B", _spill_bytes),
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


#: Among trials whose objective values are equal (or within noise), the winner is the first by
#: this order: less local memory (spill bytes, then stack frame), then fewer registers; then
#: fewer flags, then the baseline itself, then shorter compile time, then the earlier trial.
#: Local memory comes first because it costs memory traffic on every access; registers only
#: limit occupancy.
SECONDARY_ORDER = ("spill-bytes", "stack", "registers")


def compile_metrics(result: Any) -> dict[str, float | None]:
    """Every compile metric of a successful compile; None for one the compiler did not report.

    A metric is never read as 0 when its line is missing: a report without the ``Used`` line of
    a kernel has no register count, not zero registers.
    """
    return {name: m.extract(result) for name, m in COMPILE_METRICS.items()}


#: The field and ``-v`` line each compile metric is read from, for the reason of a missing one.
_SOURCE = {
    "registers": ("registers", "Used N registers"),
    "constant": ("registers", "Used N registers"),
    "shared": ("shared_memory", "Used N registers"),
    "barriers": ("barriers", "Used N registers"),
    "stack": ("stack_frame", "N bytes stack frame"),
    "spill-bytes": ("spill_stores", "N bytes stack frame"),
    "spill-stores": ("spill_stores", "N bytes stack frame"),
    "spill-loads": ("spill_loads", "N bytes stack frame"),
}


def missing_metric_reason(result: Any, name: str) -> str:
    """One line saying why compile metric ``name`` is missing, quoting the first unexpected output line."""
    compiler = getattr(getattr(result, "compiler", None), "name", "the compiler")
    field_name, line = _SOURCE.get(name, (name, name))
    funcs = (
        _entries(result)
        if name in ("registers", "constant", "shared", "barriers", "stack")
        else list(result.functions.values())
    )
    lacking = [f.name for f in funcs if getattr(f, field_name, None) is None]
    where = ("function " + ", ".join(repr(n) for n in lacking)) if lacking else "any entry function"
    return (
        f"metric {name!r} not measured: {compiler} -v printed no '{line}' line for {where}; "
        f"{result.unexpected_line()}"
    )


def check_metric_names(names: list[str], extra: list[str] = ()) -> None:
    """CiqError naming the known metrics if one of ``names`` is unknown."""
    known = list(COMPILE_METRICS) + list(extra)
    for name in names:
        if name not in known:
            raise CiqError(f"unknown metric {name!r}; known metrics: {', '.join(known)}")
