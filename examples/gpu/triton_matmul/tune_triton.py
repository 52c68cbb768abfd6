"""Triton workflow: tune a Triton matmul's config (tiles, warps, stages) and ptxas controls together.

Needs: one NVIDIA GPU, ``pip install torch triton``, and a ptxas (CUDA toolkit or
``pip install 'ciq-optuna[cuda]'``) that Triton supports and that has a space file in spaces/.
Sized to take a few minutes (not yet timed: written without a GPU):
``python examples/gpu/triton_matmul/tune_triton.py --trials 12``.

First an injection canary: the baseline config compiled with ``-O0`` must give a different
binary than without flags (if not, the controls do not reach ptxas: cache problem) and it is
timed against the baseline. Then one Optuna study over the mixed space: each trial compiles
baseline and candidate in a fresh process through the ptxas wrapper (fresh Triton cache), checks
the candidate against torch.matmul on three inputs and minimises the interleaved time ratio.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import optuna

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import triton_matmul  # noqa: E402

from ciq_optuna.compilers import find_compiler  # noqa: E402
from ciq_optuna.errors import CiqError  # noqa: E402
from ciq_optuna.isolation import run_isolated  # noqa: E402
from ciq_optuna.space.files import load_space  # noqa: E402
from ciq_optuna.space.search import SearchSpace  # noqa: E402

#: The application half of the mixed space (GROUP_M is a constant: passed, not tuned).
APP_SPACE = {
    "BLOCK_M": [64, 128],
    "BLOCK_N": [64, 128, 256],
    "BLOCK_K": [32, 64],
    "GROUP_M": 8,
    "num_warps": [4, 8],
    "num_stages": [3, 4],
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=12)
    ap.add_argument("--size", type=int, default=4096, help="M = N = K (%(default)s)")
    ap.add_argument(
        "--arch", default="sm_90a", help="architecture the ptxas space is filtered for (%(default)s)"
    )
    ap.add_argument("--ptxas", help="real ptxas behind the wrapper (default: found as by ciq-optuna)")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per evaluation (%(default)s)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    ptxas = find_compiler("ptxas", args.ptxas)
    space = SearchSpace(APP_SPACE, compilers=[load_space("ptxas", ptxas.release).for_arch(args.arch)])
    print(f"{ptxas}; mixed space of about {space.size()} points")

    def evaluate(app: dict, flags: list[str]) -> dict:
        return run_isolated(
            triton_matmul.evaluate,
            app,
            flags,
            real_ptxas=str(ptxas.path),
            size=args.size,
            timeout=args.timeout,
        )

    canary = evaluate(dict(triton_matmul.BASELINE_APP), ["-O0"])
    if canary["candidate_code_hash"] == canary["baseline_code_hash"]:
        print("injection check FAILED: -O0 gave the baseline's binary; the controls do not reach ptxas")
        return 1
    print(
        f"injection check: -O0 changes the binary and runs at {canary['time_ratio']:.3f} x the baseline "
        f"({canary['gpu']}, triton {canary['triton']})"
    )

    def objective(trial: optuna.Trial) -> float:
        cand = space.suggest(trial)
        flags = cand.flags["ptxas"]
        trial.set_user_attr("flags", flags)
        try:
            res = evaluate(cand.app, flags)
        except CiqError as exc:
            trial.set_user_attr("error", str(exc))
            raise
        trial.set_user_attr("binary_hash", res["candidate_code_hash"])
        trial.set_user_attr("runtime_samples_ms", res["samples"]["candidate"])
        trial.set_user_attr("baseline_samples_ms", res["samples"]["baseline"])
        trial.set_user_attr("time_ms", res["time_ms"])
        return res["time_ratio"]

    study = optuna.create_study(
        direction="minimize", sampler=optuna.samplers.TPESampler(seed=args.seed), study_name="triton-matmul"
    )
    study.enqueue_trial({**{k: v for k, v in triton_matmul.BASELINE_APP.items() if k != "GROUP_M"},
                         **space.baseline_params()})  # fmt: skip
    study.optimize(objective, n_trials=args.trials, catch=(CiqError,))
    best = study.best_trial
    print(f"best trial {best.number}: time ratio {best.value:.4f} vs the baseline config")
    print(f"  config {space.candidate_from_params(best.params).app}")
    print(f"  ptxas flags {best.user_attrs['flags']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
