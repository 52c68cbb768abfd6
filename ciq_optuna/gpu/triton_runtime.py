"""Runtime of a Triton kernel on the GPU: a candidate (meta-parameters + ptxas flags) against the baseline.

The project's harness (:mod:`ciq_optuna.gpu.harness`) launches a cubin through cupy with a fixed
geometry; a Triton candidate's geometry follows its meta-parameters (grid from the block sizes,
``32 * num_warps`` threads, Triton's dynamic shared memory and hidden arguments), so here each arm
is compiled ahead of time exactly as in the trial (:class:`~ciq_optuna.compilers.triton.TritonCompiler`,
same code hash, checked) and launched by **Triton's own launcher** (``CompiledKernel[grid](...)``
with cupy buffers as plain device pointers on cupy's stream). Everything else is the harness's:
cupy CUDA events, mirrored interleaving and the stopping rule of :mod:`ciq_optuna.gpu.stats`,
the L2 flush, the correctness gate against the baseline's outputs on several seeds, one fresh
process per evaluation. ``triton.testing.do_bench`` was not used: it needs torch (not an extra of
this project), times one configuration at a time instead of interleaving with the baseline, and
has no precision-based stopping, so its numbers would not be comparable with ``validate``'s.

The kernel file's ``CIQ_OPTUNA[name]["launch"]`` gives the inputs: ``launch(meta, seed)`` returns
``{"args": {name: cupy array or number}, "grid": (x, y, z), "outputs": [names], "rtol", "atol"}``.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ciq_optuna.acf import read_acf
from ciq_optuna.compilers.cubin import code_hash
from ciq_optuna.compilers.triton import TritonCompiler, TritonKernel, load_kernel, triton_ptxas
from ciq_optuna.errors import CiqError
from ciq_optuna.gpu.errors import LaunchError, MeasurementError
from ciq_optuna.gpu.harness import L2Flusher, TimingOptions, environment, import_cupy, metrics_from
from ciq_optuna.gpu.stats import StoppingRule, measure_interleaved
from ciq_optuna.isolation import IsolatedFailure, run_isolated

Arm = tuple[dict[str, Any], list[str]]  # (meta-parameters, ptxas flags)


def launch_description(kernel: TritonKernel, meta: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """The kernel file's ``launch(meta, seed)``, checked; CiqError naming what is wrong."""
    if kernel.launch is None:
        raise CiqError(
            f"{kernel.path.name}: CIQ_OPTUNA[{kernel.name!r}] has no 'launch' function (needed on the GPU)"
        )
    desc = dict(kernel.launch(dict(meta), seed))
    runtime = [p.name for p in kernel.fn.params if not p.is_constexpr]
    args = dict(desc.get("args") or {})
    missing = [n for n in runtime if n not in args]
    if missing:
        raise CiqError(f"{kernel.name}: launch() gives no value for {', '.join(missing)}")
    grid = tuple(int(g) for g in desc.get("grid", ()))
    if not 1 <= len(grid) <= 3:
        raise CiqError(
            f"{kernel.name}: launch() must give a grid of 1 to 3 dimensions, not {desc.get('grid')!r}"
        )
    outputs = list(desc.get("outputs") or [])
    if not outputs or any(o not in args for o in outputs):
        raise CiqError(f"{kernel.name}: launch() 'outputs' must name arguments, got {outputs!r}")
    return {
        "args": args,
        "grid": grid + (1,) * (3 - len(grid)),
        "outputs": outputs,
        "rtol": float(desc.get("rtol", 1e-2)),
        "atol": float(desc.get("atol", 1e-2)),
    }


def kernel_arguments(
    kernel: TritonKernel, constexprs: Mapping[str, Any], args: Mapping[str, Any]
) -> list[Any]:
    """Every argument in the kernel's order, as Triton's launcher takes them: device arrays as
    their pointer (an int), constexprs by value."""
    out = []
    for p in kernel.fn.params:
        value = constexprs[p.name] if p.is_constexpr else args[p.name]
        data = getattr(value, "data", None)
        if hasattr(data, "ptr"):  # a cupy array
            value = int(data.ptr)
        elif hasattr(value, "item") and not isinstance(value, (int, float)):  # a numpy scalar
            value = value.item()
        out.append(value)
    return out


def _evaluate(
    sys_path: list[str],
    kernel_ref: str,
    arch: str,
    ptxas: str | None,
    arms: dict[str, Arm],
    check_hash: str | None,
    seeds: Sequence[int],
    options: TimingOptions,
    cache_dir: str | None = None,
) -> dict[str, Any]:
    """Child side: compile every arm, check the candidate against the baseline, time them interleaved.

    ``phases`` in the result: seconds spent starting (imports, kernel file), compiling the arms,
    checking outputs (inputs made, launched, compared) and timing, to show where an evaluation goes.
    """
    from ciq_optuna.gpu.correctness import check_outputs

    clock = time.perf_counter()
    phases: dict[str, float] = {}

    def lap(name: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        phases[name] = round(now - clock, 3)
        clock = now

    for entry in reversed(sys_path):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    cupy = import_cupy()
    cupy.cuda.Device(options.device).use()
    kernel = load_kernel(kernel_ref)
    compiler = TritonCompiler(
        triton_ptxas(arch, ptxas),
        kernel,
        explicit_ptxas=ptxas is not None,
        cache_dir=Path(cache_dir) if cache_dir else None,
    )
    lap("start")
    runners = {}
    for name, (meta, flags) in arms.items():
        res = _compile(compiler, arch, meta, flags)
        if name == "candidate" and check_hash and res.code_hash != check_hash:
            raise MeasurementError("the candidate recompiled to another binary than the trial's")
        constexprs, _ = compiler.compile_options(meta, flags)
        runners[name] = (res.compiled, constexprs, meta)
    lap("compile")
    stream = cupy.cuda.get_current_stream()

    def prepared(name: str, seed: int) -> tuple[Any, dict[str, Any]]:
        compiled, constexprs, meta = runners[name]
        desc = launch_description(kernel, {**constexprs, **meta}, seed)
        full = kernel_arguments(kernel, constexprs, desc["args"])
        run = compiled[desc["grid"]]
        return (lambda: run(*full, stream=stream.ptr)), desc

    for seed in seeds:
        outs = {}
        for name in arms:
            go, desc = prepared(name, seed)
            try:
                go()
                stream.synchronize()
            except Exception as exc:
                raise LaunchError(
                    f"{name} failed on input seed {seed}: {type(exc).__name__}: {exc}"
                ) from None
            outs[name] = ([desc["args"][o] for o in desc["outputs"]], desc)  # compared on the GPU
        if "candidate" in outs:
            (expected, desc), (got, _) = outs["baseline"], outs["candidate"]
            check_outputs(expected, got, rtol=desc["rtol"], atol=desc["atol"], label=f"seed {seed}")
    lap("check")
    flush = L2Flusher() if options.flush_l2 else None
    timed = {}
    for name in arms:
        go, _ = prepared(name, 0)
        start, end = cupy.cuda.Event(), cupy.cuda.Event()

        def arm(go: Any = go, start: Any = start, end: Any = end) -> float:
            if flush is not None:
                flush()
            start.record(stream)
            go()
            end.record(stream)
            end.synchronize()
            return float(cupy.cuda.get_elapsed_time(start, end))

        timed[name] = arm
    m = measure_interleaved(timed, options.rule)
    summaries = m.summaries(percentile=options.percentile, outlier_k=options.outlier_k)
    lap("timing")
    return {
        "summaries": {name: s.to_dict() for name, s in summaries.items()},
        "stop_reason": m.stop_reason,
        "rounds": m.rounds,
        "energy": None,
        "environment": environment(options.device),
        "phases": phases,
    }


def _compile(compiler: TritonCompiler, arch: str, meta: dict[str, Any], flags: list[str]) -> Any:
    with tempfile.TemporaryDirectory(prefix="ciq-triton-run-") as tmp:
        res = compiler.compile(None, arch, flags, output=Path(tmp) / "k.cubin", app=meta)
    if not res.ok:
        raise LaunchError(f"does not compile: {res.error}")
    return res


class TritonRuntimeMeasure:
    """``measure(cubin_path, candidate)`` of a Triton study: the candidate's time against the baseline.

    Each call runs in a fresh process (a crash or hang fails the trial only): both arms compiled
    as in the trial (the candidate's code hash must match the trial's cubin), the correctness gate
    on ``seeds``, then interleaved timing until ``rule``'s precision target or caps.
    """

    def __init__(
        self,
        kernel: TritonKernel,
        arch: str,
        *,
        ptxas: str | None = None,
        rule: StoppingRule | None = None,
        seeds: Sequence[int] = (0, 1, 2),
        flush_l2: bool = True,
        device: int = 0,
        timeout: float = 300.0,
    ) -> None:
        if kernel.launch is None:
            raise CiqError(
                f"{kernel.path.name}: CIQ_OPTUNA[{kernel.name!r}] needs a 'launch' function to time the kernel"
            )
        self.kernel = kernel
        self.arch = arch
        self.ptxas = ptxas
        self.options = TimingOptions(
            rule=rule or StoppingRule(max_seconds=5), flush_l2=flush_l2, device=device
        )
        self.seeds = tuple(seeds)
        self.timeout = timeout
        self.last_result: dict[str, Any] | None = None
        # one Triton cache for this measure's evaluations: the baseline is compiled once, not per trial
        self.cache_dir = Path(tempfile.mkdtemp(prefix="ciq-triton-runtime-"))
        weakref.finalize(self, shutil.rmtree, self.cache_dir, True)

    def evaluate(self, arms: dict[str, Arm], check_hash: str | None = None) -> dict[str, Any]:
        from ciq_optuna.gpu.objective import translate_failure

        start = time.perf_counter()
        try:
            result = run_isolated(
                _evaluate,
                list(sys.path),
                self.kernel.ref,
                self.arch,
                self.ptxas,
                arms,
                check_hash,
                self.seeds,
                self.options,
                str(self.cache_dir),
                timeout=self.timeout,
            )
        except IsolatedFailure as exc:
            raise translate_failure(exc) from None
        result["phases"] = {**result.get("phases", {}), "total": round(time.perf_counter() - start, 3)}
        self.last_result = result
        return result

    def __call__(self, cubin_path: str | os.PathLike, candidate: Any) -> dict[str, float]:
        arms = {
            "baseline": (self.kernel.baseline_app(), []),
            "candidate": (dict(candidate.app), candidate.all_flags()),
        }
        expected = code_hash(Path(cubin_path).read_bytes(), skip_debug=True)
        return metrics_from(self.evaluate(arms, expected))

    def user_attrs(self) -> dict[str, Any]:
        r = self.last_result
        if r is None:
            return {}
        s = r["summaries"]
        return {
            "runtime_samples_ms": s["candidate"]["samples"],
            "baseline_samples_ms": s["baseline"]["samples"],
            "runtime_stop_reason": r["stop_reason"],
            "runtime_phases_s": r.get("phases", {}),
            "gpu": r["environment"].get("gpu"),
        }


def runtime_measure(objective: Any) -> TritonRuntimeMeasure:
    """The GPU measure of a Triton objective rebuilt from a study (workers)."""
    compiler = objective.compiler
    return TritonRuntimeMeasure(
        compiler.kernel,
        objective.arch,
        ptxas=str(compiler.info.path) if compiler.explicit_ptxas else None,
        timeout=objective.timeout,
    )


class TritonAcfMeasure:
    """``measure(acf_path) -> Comparison`` for ``ciq-optuna validate`` on Triton ACFs: the ACF's
    meta-parameters and ptxas flags against the kernel's baseline, a fixed number of repeats."""

    def __init__(self, kernel: TritonKernel, *, repeats: int = 200, warmup: int = 50, **kwargs: Any) -> None:
        self.kernel = kernel
        self.repeats, self.warmup, self.kwargs = repeats, warmup, kwargs

    def __call__(self, acf_path: str | os.PathLike) -> Any:
        from ciq_optuna.gpu.winners import Comparison

        acf = read_acf(acf_path)
        t = acf.triton
        if not t or t.get("kernel") != self.kernel.name:
            raise CiqError(f"{acf_path} is not an ACF of Triton kernel {self.kernel.name!r}")
        rule = StoppingRule(
            warmup=self.warmup, min_repeats=self.repeats, max_repeats=self.repeats, rel_precision=0.0
        )
        measure = TritonRuntimeMeasure(self.kernel, acf.arch, rule=rule, **self.kwargs)
        meta = {**t.get("constexprs", {}), **t.get("options", {})}
        arms = {"baseline": (self.kernel.baseline_app(), []), "candidate": (meta, list(acf.flags))}
        result = measure.evaluate(arms, acf.binary.get("code_sha256"))
        s = result["summaries"]
        env = dict(result["environment"], arch=acf.arch, stop_reason=result["stop_reason"])
        return Comparison(
            baseline=list(s["baseline"]["samples"]),
            candidate=list(s["candidate"]["samples"]),
            environment=env,
        )
