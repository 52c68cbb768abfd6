"""The child side of an isolated Triton compile (:class:`~ciq_optuna.compilers.triton.TritonCompiler`
with ``isolate=True``): one compile in a process of its own, whose result comes back by pickle.

The fork server imports this module before its first child (:func:`ciq_optuna.isolation.preload`),
so what every compile would otherwise pay again in a fresh process is done once there: importing
Triton, its NVIDIA back end and its code generator, and Triton's ``triton_key()`` (a hash of all of
Triton's sources and ``libtriton``, ~0.9 s here, cached per process). Nothing that depends on the
target or on the ptxas used is cached here, so a child compiles as a fresh process would.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import triton  # noqa: F401 - imported here so that the fork server preloads it
import triton.backends.nvidia.compiler  # noqa: F401
import triton.compiler.code_generator  # noqa: F401
from triton.runtime.cache import triton_key

from ciq_optuna.compilers.triton import compile_kernel, load_kernel
from ciq_optuna.errors import CiqError

triton_key()


@dataclass
class ChildCompile:
    """What one compile hands back: the cubin and PTX (None when it failed), the ``ptxas -v`` log,
    the compile's seconds, its one-line error and Triton's dynamic shared memory."""

    cubin: bytes | None
    ptx: str | None
    log: str
    seconds: float
    error: str | None
    shared: int = 0


def compile_in_child(
    sys_path: list[str],
    kernel_ref: str,
    file_sha256: str,
    cap: int,
    constexprs: Mapping[str, Any],
    options: Mapping[str, Any],
    ptxas: str | None,
    cache_root: str,
) -> ChildCompile:
    """Import the kernel file afresh and compile it once, as :func:`compile_kernel` does in-process."""
    for entry in reversed(sys_path):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    kernel = load_kernel(kernel_ref)
    if kernel.file_sha256 != file_sha256:
        raise CiqError(f"{kernel.path} changed since the study started")
    compiled, log, seconds, error = compile_kernel(
        kernel, cap, constexprs, options, ptxas=ptxas, cache_root=Path(cache_root)
    )
    if error is not None:
        return ChildCompile(None, None, log, seconds, error)
    return ChildCompile(
        cubin=bytes(compiled.asm["cubin"]),
        ptx=compiled.asm["ptx"],
        log=log,
        seconds=seconds,
        error=None,
        shared=int(getattr(compiled.metadata, "shared", 0) or 0),
    )
