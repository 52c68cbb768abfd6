"""Correctness gate: compare a candidate's outputs with the reference, element by element.

An element passes when ``|got - expected| <= atol + rtol * |expected|`` (numpy's ``isclose``);
NaN passes only where the reference is NaN too, and shapes and dtypes must agree. The message of a
mismatch names the input, the output, how many elements differ and the worst one, so that a
failed trial explains itself in one line. cupy arrays are compared on the GPU (cupy's ``isclose``,
the same formula) and copied to the host only when they differ.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ciq_optuna.gpu.errors import CorrectnessError


def compare_outputs(
    expected: Sequence[Any],
    got: Sequence[Any],
    *,
    rtol: float,
    atol: float,
    label: str = "",
) -> str | None:
    """None when every output matches, else a one-line description of the first mismatch."""
    where = f" ({label})" if label else ""
    if len(expected) != len(got):
        return f"{len(got)} outputs, expected {len(expected)}{where}"
    for i, (e, g) in enumerate(zip(expected, got, strict=True)):
        xp = _array_module(e)
        if xp is not np and _array_module(g) is xp and e.shape == g.shape and e.dtype == g.dtype:
            if bool(_matches(xp, e, g, rtol, atol).all()):
                continue
            e, g = xp.asnumpy(e), xp.asnumpy(g)  # a mismatch: its description is worked out here
        e = _host(e)
        g = _host(g)
        if e.shape != g.shape:
            return f"output {i}{where}: shape {g.shape}, expected {e.shape}"
        if e.dtype != g.dtype:
            return f"output {i}{where}: dtype {g.dtype}, expected {e.dtype}"
        ok = _matches(np, e, g, rtol, atol)
        if ok.all():
            continue
        bad = np.flatnonzero(~ok.reshape(-1))
        ef = e.reshape(-1)
        gf = g.reshape(-1)
        if e.dtype.kind in "fc":
            err = np.abs(gf[bad].astype(np.complex128) - ef[bad].astype(np.complex128))
            err = np.where(np.isnan(err), np.inf, err)
            worst = int(bad[int(np.argmax(err))])
        else:
            worst = int(bad[0])
        idx = np.unravel_index(worst, e.shape) if e.ndim else ()
        return (
            f"output {i}{where}: {bad.size} of {e.size} elements differ beyond rtol={rtol:g} atol={atol:g}; "
            f"worst at index {tuple(int(j) for j in idx)}: got {gf[worst].item()!r}, expected {ef[worst].item()!r}"
        )
    return None


def _array_module(a: Any) -> Any:
    """numpy, or cupy for a cupy array: GPU outputs are compared where they are, and copied to the
    host only to describe a mismatch (a 4096 x 4096 output compared by numpy takes seconds)."""
    if type(a).__module__.partition(".")[0] == "cupy":
        import cupy

        return cupy
    return np


def _host(a: Any) -> np.ndarray:
    xp = _array_module(a)
    return xp.asnumpy(a) if xp is not np else np.asarray(a)


def _matches(xp: Any, e: Any, g: Any, rtol: float, atol: float) -> Any:
    """Element-wise pass/fail (``isclose`` for floating and complex outputs, equality otherwise)."""
    if e.dtype.kind in "fc":
        return xp.isclose(g, e, rtol=rtol, atol=atol, equal_nan=True)
    return g == e


def check_outputs(
    expected: Sequence[Any], got: Sequence[Any], *, rtol: float, atol: float, label: str = ""
) -> None:
    """Raise :class:`CorrectnessError` with :func:`compare_outputs`' message on a mismatch."""
    msg = compare_outputs(expected, got, rtol=rtol, atol=atol, label=label)
    if msg is not None:
        raise CorrectnessError(f"wrong result: {msg}")
