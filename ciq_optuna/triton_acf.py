"""Apply a Triton kernel's ACF at run time: the ``triton.Config`` with the tuned meta-parameters and ptxas flags.

Triton takes ptxas flags through its compile option ``ptx_options``, which a launch (and so a
``triton.Config``'s keyword arguments) may set per kernel: the returned config carries the tuned
constexprs, ``num_warps``/``num_stages``, ``enable_fp_fusion`` and ``ptx_options``. Triton keys its
caches on every compile option, so a kernel compiled with other flags is never reused for it.

    from ciq_optuna.triton_acf import apply_acf
    config = apply_acf("matmul_kernel.sm_90a.acf", matmul_kernel)
    matmul_kernel[grid](a, b, c, M, N, K, ..., **config.all_kwargs())
    # or: triton.autotune(configs=[config], key=[])(matmul_kernel)

The ACF must be for this kernel's source and this Triton version, and Triton must run a ptxas of
the ACF's version for the target (if its own is another version and the ACF's ptxas exists here,
:func:`apply_acf` points Triton's ``ptxas`` knobs at it, for the whole process).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from ciq_optuna.acf import Acf, read_acf
from ciq_optuna.compilers.cubin import code_hash
from ciq_optuna.compilers.locate import compiler_info
from ciq_optuna.compilers.triton import (
    TritonKernel,
    capability,
    compile_kernel,
    load_kernel,
    triton_ptxas,
    triton_version,
)
from ciq_optuna.errors import CiqError


def _acf(acf: str | Path | Acf) -> Acf:
    acf = acf if isinstance(acf, Acf) else read_acf(acf)
    if not acf.triton:
        raise CiqError("this ACF is not for a Triton kernel (it has no [triton] table)")
    return acf


def config_kwargs(acf: str | Path | Acf) -> tuple[dict[str, Any], dict[str, Any]]:
    """(kwargs, Config options) of the ACF's ``triton.Config``: constexprs, ``enable_fp_fusion`` and
    ``ptx_options`` as keyword arguments; ``num_warps``, ``num_stages``, ``num_ctas``, ``maxnreg``."""
    t = _acf(acf).triton
    options = dict(t.get("options", {}))
    kwargs = dict(t.get("constexprs", {}))
    for name in list(options):
        if name not in ("num_warps", "num_stages", "num_ctas", "maxnreg"):
            kwargs[name] = options.pop(name)
    kwargs["ptx_options"] = t.get("ptx_options", "")
    return kwargs, options


def triton_config(acf: str | Path | Acf) -> Any:
    """The ACF's ``triton.Config`` (no checks; see :func:`apply_acf`)."""
    import triton

    kwargs, options = config_kwargs(acf)
    return triton.Config(kwargs, **options)


def config_text(acf: str | Path | Acf, acf_name: str = "KERNEL.acf") -> str:
    """What a Triton user pastes: the ``triton.Config`` and how to launch with it."""
    acf = _acf(acf)
    t = acf.triton
    kwargs, options = config_kwargs(acf)
    args = ", ".join(f"{k}={v!r}" for k, v in options.items())
    kernel = t.get("kernel", "kernel")
    env = "TRITON_PTXAS_BLACKWELL_PATH" if int(t.get("capability", 0)) >= 90 else "TRITON_PTXAS_PATH"
    return "\n".join(
        [
            f"# {kernel} tuned for {acf.arch} with Triton {t.get('version')} and ptxas {acf.compiler_version}",
            "import triton",
            f"config = triton.Config({_py_dict(kwargs)}{', ' + args if args else ''})",
            f"# launch:   {kernel}[grid](..., **config.all_kwargs())",
            f"# autotune: triton.autotune(configs=[config], key=[])({kernel})",
            "# checked at run time (Triton version, kernel source, ptxas version):",
            "#   from ciq_optuna.triton_acf import apply_acf",
            f"#   config = apply_acf({acf_name!r}, {kernel})",
            f"# Triton must run ptxas {acf.compiler_version} for {acf.arch}; tuned with {t.get('ptxas_path')}",
            f"# (another ptxas: {env}=/path/to/ptxas)",
        ]
    )


def _py_dict(values: dict[str, Any]) -> str:
    return "{" + ", ".join(f"{k!r}: {v!r}" for k, v in values.items()) + "}"


def _jit_function(kernel: Any) -> Any:
    from triton.runtime.jit import JITFunction

    fn = kernel
    while not isinstance(fn, JITFunction) and hasattr(fn, "fn"):
        fn = fn.fn
    if not isinstance(fn, JITFunction):
        raise CiqError(f"{kernel!r} is not a @triton.jit kernel")
    return fn


def apply_acf(acf: str | Path | Acf, kernel: Any, *, check_source: bool = True) -> Any:
    """Check the ACF against ``kernel`` and this Triton, set up its ptxas, return its ``triton.Config``.

    CiqError when the ACF is for another kernel, kernel source (unless ``check_source=False``),
    Triton version, or a ptxas that neither Triton nor the ACF's path provides here.
    """
    acf = _acf(acf)
    t = acf.triton
    fn = _jit_function(kernel)
    if fn.__name__ != t.get("kernel"):
        raise CiqError(f"this ACF is for kernel {t.get('kernel')!r}, not {fn.__name__!r}")
    if check_source and hashlib.sha256(fn.src.encode()).hexdigest() != t.get("source_sha256"):
        raise CiqError(f"{fn.__name__}'s source changed since it was tuned: tune it again")
    version = triton_version()
    if version != t.get("version"):
        raise CiqError(f"this ACF was tuned with Triton {t.get('version')}; Triton here is {version}")
    use_ptxas(acf)
    return triton_config(acf)


def use_ptxas(acf: str | Path | Acf) -> Path:
    """Make Triton run a ptxas of the ACF's version for its target; returns that ptxas."""
    acf = _acf(acf)
    want = acf.compiler_version
    current = triton_ptxas(acf.arch)
    if current.version == want:
        return current.path
    recorded = Path(acf.triton.get("ptxas_path", ""))
    if recorded.is_file() and compiler_info("ptxas", recorded).version == want:
        from triton import knobs

        knobs.nvidia.ptxas = str(recorded)
        knobs.nvidia.ptxas_blackwell = str(recorded)
        return recorded
    raise CiqError(
        f"this ACF was tuned with ptxas {want}; Triton runs {current} for {acf.arch} and "
        f"{recorded} is not that version (set TRITON_PTXAS_PATH / TRITON_PTXAS_BLACKWELL_PATH)"
    )


def compile_config(kernel: str | TritonKernel, config: Any, arch: str) -> tuple[Any, str]:
    """Compile ``kernel`` (``path.py:name`` or loaded) ahead of time with a ``triton.Config``.

    The config's keyword arguments are split as a launch splits them (kernel constexprs vs.
    compile options). Returns (Triton's compiled kernel, its code hash as the ACF records it).
    """
    kernel = kernel if isinstance(kernel, TritonKernel) else load_kernel(kernel)
    constexprs = dict(kernel.defaults)
    options: dict[str, Any] = {}
    for key, value in config.all_kwargs().items():
        (constexprs if key in kernel.constexpr_names else options)[key] = value
    compiled, log, _, error = compile_kernel(kernel, capability(arch), constexprs, options)
    if error is not None:
        raise CiqError(f"{kernel.name} does not compile with this config: {error}")
    return compiled, code_hash(bytes(compiled.asm["cubin"]), skip_debug=True)
