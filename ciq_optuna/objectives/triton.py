"""Triton kernels in a tuning study: one search space of meta-parameters and ptxas controls.

The meta-parameters a kernel's ``CIQ_OPTUNA`` spec declares (block sizes, ``num_warps``,
``num_stages``, other constexprs) are application parameters of the study's
:class:`~ciq_optuna.search_space.SearchSpace`; the ptxas controls come from the space file of
the ptxas Triton uses. A trial compiles the kernel with both through
:class:`~ciq_optuna.compilers.triton.TritonCompiler`; everything else (metrics, de-duplication,
measurement, baseline, simplification, ACF) is the compile objective's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ciq_optuna.compilers.triton import (
    TritonCompiler,
    TritonKernel,
    capability,
    check_arch,
    load_kernel,
    store_variant,
    triton_ptxas,
    triton_version,
)
from ciq_optuna.errors import CiqError
from ciq_optuna.objectives.compile import CompileObjective
from ciq_optuna.space.compiler_space import CompilerSpace
from ciq_optuna.space.search import Candidate, SearchSpace

KIND = "triton"
#: Metrics of the GPU runtime measure (:mod:`ciq_optuna.gpu.triton_runtime`); naming one of them
#: in ``--minimize``/``--maximize`` times every new binary on the GPU.
RUNTIME_METRICS = ("time_ms", "time_ratio", "baseline_time_ms", "time_p90_ms", "time_rel_ci")


class TritonSearchSpace(SearchSpace):
    """The kernel's meta-parameters and the compiler spaces; the baseline holds the kernel's
    baseline meta-parameters as well as the compiler defaults."""

    def __init__(self, kernel: TritonKernel, compilers: Sequence[CompilerSpace] = ()) -> None:
        super().__init__(app={**kernel.constants, **kernel.space}, compilers=compilers)
        self.app_baseline = dict(kernel.baseline)

    def baseline_params(self) -> dict[str, Any]:
        return {**self.app_baseline, **super().baseline_params()}


class TritonObjective(CompileObjective):
    """The compile objective for a Triton kernel: a candidate's meta-parameters reach Triton too."""

    def compile(self, candidate: Candidate, output: Path) -> Any:
        return self.compiler.compile(
            None,
            self.arch,
            self.command_flags(candidate),
            output=output,
            timeout=self.timeout,
            app=candidate.app or None,
        )


def triton_compiler(kernel: TritonKernel, arch: str, compiler_path: str | None) -> TritonCompiler:
    """The compiler for ``kernel`` on ``arch``: Triton's own ptxas, or ``compiler_path``.

    Every compile runs isolated (a process of its own, killed on the trial's timeout), so a
    candidate that hangs or crashes Triton fails its trial only.
    """
    info = triton_ptxas(arch, compiler_path)
    check_arch(info, arch)
    return TritonCompiler(info, kernel, explicit_ptxas=compiler_path is not None, isolate=True)


def triton_meta(kernel: TritonKernel, compiler: TritonCompiler) -> dict[str, Any]:
    """The study metadata of a Triton kernel: the ``kernel`` and ``triton`` entries."""
    return {
        "kernel": {
            "path": str(kernel.path),
            "sha256": kernel.file_sha256,
            "name": kernel.name,
            "file": kernel.path.name,
            "variant": store_variant(kernel, compiler.triton_version),
        },
        "triton": {
            "version": compiler.triton_version,
            "source_sha256": kernel.source_sha256,
            "explicit_ptxas": compiler.explicit_ptxas,
        },
    }


def build_triton_compiler(
    meta: Mapping[str, Any], kernel_file: Path, compiler_path: str | None
) -> TritonCompiler:
    """The study's compiler on this machine (workers, ``acf from-study``); CiqError on a mismatch."""
    version = triton_version()
    if version != meta["triton"]["version"]:
        raise CiqError(
            f"the study was tuned with Triton {meta['triton']['version']}; Triton here is {version}"
        )
    kernel = load_kernel(f"{kernel_file}:{meta['kernel']['name']}")
    comp = meta["compiler"]
    explicit = compiler_path or (comp["path"] if meta["triton"].get("explicit_ptxas") else None)
    compiler = triton_compiler(kernel, meta["arch"], explicit)
    if compiler.info.version != comp["version"]:
        raise CiqError(
            f"the study was tuned with ptxas {comp['version']} ({comp['path']}); Triton's ptxas here is "
            f"{compiler.info} (pass --compiler-path)"
        )
    return compiler


def acf_triton_section(
    meta: Mapping[str, Any], compiler: TritonCompiler, candidate: Candidate
) -> dict[str, Any]:
    """The ACF's ``[triton]`` table: what a Triton user needs to compile the kernel as tuned."""
    constexprs, options = compiler.compile_options(candidate.app, candidate.all_flags())
    options.pop("ptx_options")
    return {
        "version": meta["triton"]["version"],
        "kernel": meta["kernel"]["name"],
        "file": meta["kernel"]["file"],
        "source_sha256": meta["triton"]["source_sha256"],
        "capability": capability(meta["arch"]),
        "ptxas_path": meta["compiler"]["path"],
        "constexprs": constexprs,
        "options": options,
        "ptx_options": " ".join(candidate.all_flags()),
    }
