"""What the fork server loads before its first isolated Triton compile (``TritonCompiler(isolate=True)``).

:func:`ciq_optuna.isolation.preload` names this module, so the work every compile would otherwise
repeat in a fresh process is done once, in the server: importing Triton, its NVIDIA back end and
its code generator, and Triton's ``triton_key()`` (a hash of all of Triton's sources and
``libtriton``, ~0.9 s here, cached per process). Nothing that depends on the target or on the
ptxas used is cached, so a child compiles as a fresh process would.
"""

from __future__ import annotations

import triton  # noqa: F401
import triton.backends.nvidia.compiler  # noqa: F401
import triton.compiler.code_generator  # noqa: F401
from triton.runtime.cache import triton_key

triton_key()
