"""Build a compile objective from a study's metadata, on this machine.

The main job (:mod:`ciq_optuna.tune`), ``ciq-optuna acf --study`` and the worker loop
(:mod:`ciq_optuna.workers`) all rebuild objectives here, so none of them imports another.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import optuna

from ciq_optuna.compilers.base import get_compiler
from ciq_optuna.errors import CiqError
from ciq_optuna.objectives.command import CommandMeasure
from ciq_optuna.objectives.compile import CompileObjective, Measure
from ciq_optuna.space.compiler_space import CompilerSpace
from ciq_optuna.space.files import find_space
from ciq_optuna.space.search import SearchSpace
from ciq_optuna.study.metadata import file_sha256, metadata


def build_objective(
    meta: Mapping[str, Any],
    *,
    kernel: Path | None = None,
    compiler_path: str | None = None,
    measure: Measure | None = None,
    workdir: Path | None = None,
) -> CompileObjective:
    """The objective described by a study's metadata, on this machine; CiqError on any mismatch."""
    triton = meta.get("kind") == "triton"
    kernel = Path(kernel or meta["kernel"]["path"])
    if kernel.is_dir():
        raise CiqError(f"kernel {kernel} is a directory; give the kernel file (.ptx or .cu)")
    if not kernel.is_file():
        raise CiqError(f"kernel not found: {kernel} (pass --kernel PATH to a copy with the same content)")
    if file_sha256(kernel) != meta["kernel"]["sha256"]:
        raise CiqError(
            f"kernel {kernel} differs from the study's (sha256 {meta['kernel']['sha256'][:12]}...)"
        )
    comp = meta["compiler"]
    if triton:
        from ciq_optuna.objectives.triton import build_triton_compiler

        compiler = build_triton_compiler(meta, kernel, compiler_path)
    else:
        compiler = get_compiler(comp["name"], compiler_path or _existing(comp.get("path")), release=None)
    if compiler.info.version != comp["version"]:
        raise CiqError(f"the study was tuned with {comp['name']} {comp['version']}; found {compiler.info}")
    spaces = []
    for ident in meta["spaces"]:
        path = Path(ident["path"]) if ident.get("path") and Path(ident["path"]).is_file() else None
        space = CompilerSpace.load(path or find_space(ident["compiler"], ident["cuda"]))
        if space.sha256 != ident["sha256"]:
            raise CiqError(
                f"search space {ident['name']} {ident['cuda']} here differs from the study's "
                f"(sha256 {ident['sha256'][:12]}...)"
            )
        spaces.append(space.for_arch(meta["arch"]))
    m = meta.get("measure")
    # a GPU-timed Triton study ({"kind": "triton-runtime"}) gets its measure from the worker
    # (ciq_optuna.workers, above gpu/): objectives never import the GPU layer
    if measure is None and m and "command" in m:
        measure = CommandMeasure(
            m["command"],
            m["name"],
            m["regex"],
            kernel=kernel,
            arch=meta["arch"],
            timeout=meta.get("timeout", 300.0),
            cwd=Path(m["cwd"]) if m.get("cwd") and Path(m["cwd"]).is_dir() else None,
        )
    objective_cls, space = CompileObjective, SearchSpace(compilers=spaces)
    if triton:
        from ciq_optuna.objectives.triton import TritonObjective, TritonSearchSpace

        objective_cls, space = TritonObjective, TritonSearchSpace(compiler.kernel, spaces)
    return objective_cls(
        compiler,
        kernel,
        meta["arch"],
        space,
        list(meta["metrics"]),
        measure=measure,
        timeout=meta.get("timeout", 120.0),
        workdir=workdir,
    )


def _existing(path: str | None) -> str | None:
    return path if path and Path(path).exists() else None


def objective_from_study(
    study: optuna.Study, *, kernel: Path | None = None, compiler_path: str | None = None
):
    """Rebuild a study's objective on this machine (workers); CiqError on any mismatch.

    ``kernel`` and ``compiler_path`` override where the kernel and compiler are found here;
    their content hash and version must still match the study's.
    """
    return build_objective(metadata(study), kernel=kernel, compiler_path=compiler_path)
