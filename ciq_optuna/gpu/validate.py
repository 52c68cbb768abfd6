"""The GPU measure of ``ciq-optuna validate``: compile under an ACF, time against the baseline.

:class:`GpuAcfMeasure` is the ``measure`` that :func:`ciq_optuna.gpu.winners.validate_acfs`
calls once per session and candidate: it compiles the kernel source with the ACF's flags (and the
baseline with the compiler defaults, once), then runs one isolated, interleaved comparison with
a fixed number of repeats (no early stop: every session gives the same sample size).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import weakref
from pathlib import Path
from typing import Any

from ciq_optuna.acf import Acf, read_acf
from ciq_optuna.compilers import Compiler, compiler_for_source, xptxas_arg
from ciq_optuna.errors import CiqError
from ciq_optuna.gpu.harness import KernelLaunch
from ciq_optuna.gpu.objective import RuntimeObjective
from ciq_optuna.gpu.stats import StoppingRule
from ciq_optuna.gpu.winners import Comparison


class GpuAcfMeasure:
    """``measure(acf_path) -> Comparison`` for :func:`~ciq_optuna.gpu.winners.validate_acfs`.

    Args:
        launch: how to launch and check the kernel.
        source: the kernel (.ptx compiled by ptxas, .cu by nvcc; a ptxas ACF reaches ptxas
            through ``-Xptxas`` when the source is .cu).
        arch: target architecture; default the ACF's.
        compiler_path: the compiler to use (default: found as everywhere in ciq-optuna).
        repeats, warmup: timed and untimed rounds per session (200, 50).
        baseline_flags: flags of the baseline build (default: none, the compiler defaults).
        workdir: where the compared binaries are built (default: a temporary folder removed with
            this object).
    """

    def __init__(
        self,
        launch: KernelLaunch,
        source: str | os.PathLike,
        *,
        arch: str | None = None,
        compiler_path: str | os.PathLike | None = None,
        repeats: int = 200,
        warmup: int = 50,
        flush_l2: bool = True,
        device: int = 0,
        timeout: float = 600.0,
        baseline_flags: tuple[str, ...] = (),
        workdir: str | os.PathLike | None = None,
    ) -> None:
        self.launch = launch
        self.source = Path(source)
        self.arch = arch
        self.compiler: Compiler = compiler_for_source(self.source, compiler_path)
        self.rule = StoppingRule(
            warmup=warmup,
            min_repeats=repeats,
            max_repeats=repeats,
            rel_precision=0.0,
            max_seconds=timeout / 2,
        )
        self.flush_l2 = flush_l2
        self.device = device
        self.timeout = timeout
        self.baseline_flags = list(baseline_flags)
        if workdir:
            self.workdir = Path(workdir)
        else:  # the binaries are only this object's: removed with it
            self.workdir = Path(tempfile.mkdtemp(prefix="ciq-validate-"))
            weakref.finalize(self, shutil.rmtree, self.workdir, ignore_errors=True)
        self._baselines: dict[str, Path] = {}

    def flags_for(self, acf: Acf) -> list[str]:
        """The ACF's flags as this compiler takes them."""
        if acf.compiler == self.compiler.name:
            return list(acf.flags)
        if acf.compiler == "ptxas" and self.compiler.name == "nvcc":
            return ["-Xptxas", xptxas_arg(acf.flags)] if acf.flags else []
        raise CiqError(f"an ACF of {acf.compiler} controls cannot be applied to {self.source.name}")

    def _build(self, flags: list[str], arch: str, name: str) -> Path:
        res = self.compiler.compile(
            self.source, arch, flags, output=self.workdir / f"{name}.cubin", verbose=False
        )
        if not res.ok:
            raise CiqError(f"{name} does not compile: {res.error}")
        return Path(res.cubin_path)

    def __call__(self, acf_path: str | os.PathLike) -> Comparison:
        acf = read_acf(acf_path)
        if acf.compiler == self.compiler.name:
            acf.check_compiler(self.compiler.name, self.compiler.info.version)
        arch = self.arch or acf.arch
        if arch not in self._baselines:
            self._baselines[arch] = self._build(self.baseline_flags, arch, f"baseline-{arch}")
        cubin = self._build(self.flags_for(acf), arch, f"{Path(acf_path).stem}-{arch}")
        objective = RuntimeObjective(
            self.launch,
            self._baselines[arch],
            rule=self.rule,
            flush_l2=self.flush_l2,
            device=self.device,
            timeout=self.timeout,
        )
        result = objective.evaluate(cubin)
        s = result["summaries"]
        env: dict[str, Any] = dict(result["environment"])
        env["compiler"] = {"name": self.compiler.name, "version": self.compiler.info.version}
        env["compiler_path"] = str(self.compiler.info.path)
        env["arch"] = arch
        env["stop_reason"] = result["stop_reason"]
        return Comparison(
            baseline=list(s["baseline"]["samples"]),
            candidate=list(s["candidate"]["samples"]),
            environment=env,
        )
