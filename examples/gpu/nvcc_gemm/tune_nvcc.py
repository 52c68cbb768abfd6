"""NVCC workflow: tune the ptxas controls of sgemm.cu (compiled by nvcc) for runtime, then validate.

Needs: one NVIDIA GPU, the CUDA toolkit's nvcc, ``pip install 'ciq-optuna[gpu]'`` (cupy, NVML).
A trial takes about 3 s on an H200 (BENCHMARKS.md, "GPU check on an H200"), so 40 trials take
about two minutes:
``python examples/gpu/nvcc_gemm/tune_nvcc.py --trials 40``.

One trial: suggest ptxas controls -> ``nvcc -cubin -arch=ARCH -Xptxas <flags> sgemm.cu`` ->
skip the measurement if the code is identical to an earlier trial's (code hash) -> correctness
gate (host float64 reference on three inputs) and interleaved timing against the baseline build
(no flags) in a fresh process -> ``time_ratio`` (candidate median / baseline median) minimised.
At the end the best candidate is written as an ACF and validated (Welch + Holm, >= 1 %, d > 0.2).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import optuna

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from gemm_launch import gemm_launch  # noqa: E402

from ciq_optuna.acf import Acf, write_acf  # noqa: E402
from ciq_optuna.compilers import get_compiler, xptxas_arg  # noqa: E402
from ciq_optuna.errors import CiqError  # noqa: E402
from ciq_optuna.gpu import RuntimeObjective, StoppingRule  # noqa: E402
from ciq_optuna.gpu.validate import GpuAcfMeasure  # noqa: E402
from ciq_optuna.gpu.winners import ValidationSettings, validate_acfs  # noqa: E402
from ciq_optuna.space.files import load_space  # noqa: E402
from ciq_optuna.space.search import SearchSpace  # noqa: E402

SOURCE = HERE / "sgemm.cu"


def device_arch() -> str:
    """sm_XY of GPU 0 (sm_90a on Hopper, whose 'a' features ptxas may use)."""
    import cupy

    arch = f"sm_{cupy.cuda.Device(0).compute_capability}"  # "90" -> sm_90
    return arch + "a" if arch in ("sm_90", "sm_100") else arch


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=40)
    ap.add_argument("--size", type=int, default=2048, help="M = N = K (%(default)s)")
    ap.add_argument("--arch", help="default: the GPU's")
    ap.add_argument("--out", type=Path, default=Path("runs/nvcc_gemm"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-validate", action="store_true", help="stop after writing the ACF")
    ap.add_argument("--summary", type=Path, help="write baseline/best times and trial counts as JSON")
    args = ap.parse_args()

    nvcc = get_compiler("nvcc")
    arch = args.arch or device_arch()
    space = SearchSpace(compilers=[load_space("ptxas", nvcc.info.release).for_arch(arch)])
    ptxas_space = space.compilers[0]
    args.out.mkdir(parents=True, exist_ok=True)
    print(f"{nvcc.info}; arch {arch}; ptxas space {ptxas_space.name} v{ptxas_space.version}")

    def build(flags: list[str], name: str) -> tuple[Path, str]:
        nv_flags = ["-Xptxas", xptxas_arg(flags)] if flags else []
        res = nvcc.compile(SOURCE, arch, nv_flags, output=args.out / f"{name}.cubin", verbose=False)
        if not res.ok:
            raise CiqError(res.error or "compile failed")
        return Path(res.cubin_path), res.code_hash

    baseline, base_hash = build([], "baseline")
    launch = gemm_launch(args.size, args.size, args.size)
    measure = RuntimeObjective(launch, baseline, rule=StoppingRule(max_seconds=10), timeout=120)
    seen: dict[str, dict[str, float]] = {}

    def objective(trial: optuna.Trial) -> float:
        cand = space.suggest(trial)
        flags = cand.flags[ptxas_space.name]
        trial.set_user_attr("flags", flags)
        try:
            cubin, code = build(flags, f"trial{trial.number}")
        except CiqError as exc:
            trial.set_user_attr("error", str(exc))
            raise
        trial.set_user_attr("binary_hash", code)
        if code in seen:
            trial.set_user_attr("reused_binary", True)
            return seen[code]["time_ratio"]
        try:
            metrics = measure(cubin)
        except CiqError as exc:
            trial.set_user_attr("error", str(exc))
            raise
        for key, value in measure.user_attrs().items():
            trial.set_user_attr(key, value)
        trial.set_user_attr("measured", metrics)
        seen[code] = metrics
        return metrics["time_ratio"]

    sampler = optuna.samplers.TPESampler(seed=args.seed)
    study = optuna.create_study(direction="minimize", sampler=sampler, study_name="nvcc-gemm")
    study.enqueue_trial(space.baseline_params())
    study.optimize(objective, n_trials=args.trials, catch=(CiqError,))
    if not study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)):
        first = study.trials[0].user_attrs.get("error", "no error recorded") if study.trials else "no trials"
        print(f"tune_nvcc.py: error: no trial completed; the first failed with: {first}", file=sys.stderr)
        return 1
    best = study.best_trial
    print(f"best trial {best.number}: time_ratio {best.value:.4f}, flags {best.user_attrs['flags']}")
    if args.summary:
        measured = [t.user_attrs["measured"] for t in study.trials if "measured" in t.user_attrs]
        args.summary.write_text(
            json.dumps(
                {
                    "kernel": "sgemm.cu (nvcc)",
                    "arch": arch,
                    "baseline_ms": measured[0]["baseline_time_ms"] if measured else None,
                    "best_ms": seen.get(best.user_attrs["binary_hash"], {}).get("time_ms"),
                    "best_ratio": best.value,
                    "trials": len(study.trials),
                    "failed": sum(t.state == optuna.trial.TrialState.FAIL for t in study.trials),
                    "reused": sum(bool(t.user_attrs.get("reused_binary")) for t in study.trials),
                    "acf": str(args.out / "best.acf"),
                }
            )
        )
    if best.user_attrs["binary_hash"] == base_hash:
        print("the best binary is the baseline's: nothing to validate")
        return 0
    acf_path = write_acf(
        args.out / "best.acf",
        Acf(
            compiler="ptxas",
            compiler_version=nvcc.info.version,
            arch=arch,
            flags=list(best.user_attrs["flags"]),
            controls={ptxas_space.name: space.candidate_from_params(best.params).controls[ptxas_space.name]},
            space=ptxas_space.identity,
            objectives=[{"metric": "time_ratio", "direction": "minimize"}],
            kernel={"path": str(SOURCE)},
        ),
    )
    if args.no_validate:
        print(f"wrote {acf_path}")
        return 0
    report = validate_acfs(
        [acf_path], measure=GpuAcfMeasure(launch, SOURCE, arch=arch), settings=ValidationSettings(sessions=3)
    )
    print(report.format_table())
    print(f"validation record: {report.candidates[0].record}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
