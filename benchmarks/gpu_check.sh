#!/usr/bin/env bash
# GPU check: on a machine with one NVIDIA GPU (driver installed) and Python 3.10+, from a checkout
# of this repository, in one unattended command:
#
#   bash benchmarks/gpu_check.sh [OUT_DIR]        (default OUT_DIR: runs/gpu_check)
#
# 1. a venv with the extras gpu (cupy, NVML), cuda (NVIDIA's compiler wheels), triton, dev (pytest);
#    or, with GPU_CHECK_PYTHON=python3, that interpreter as it is (no venv, no pip: a machine with
#    cupy, Triton, pytest and ciq-optuna's dependencies already importable, nvcc on the PATH);
# 2. (after the runs below, so that they come first) the `gpu`-marked tests;
# 3. runtime tuning of one CUDA kernel (examples/gpu/nvcc_gemm, ptxas controls through nvcc) and
#    one Triton kernel (examples/triton/matmul.py, meta-parameters + ptxas controls), budgets sized
#    to fit in about 8 minutes together;
# 4. `ciq-optuna validate` of both winners (fresh processes, Welch + Holm);
# 5. a results table: baseline ms, best ms, speedup, validation verdict, trials, reused measurements.
#
# Each step has a time limit (seconds: TESTS_SECS, CUDA_SECS, TRITON_SECS, VALIDATE_SECS; 0 skips
# the step); a step that fails or runs out of time is reported and the next one runs.
# TRITON_COMPILE_SECS: the Triton tune's --timeout (per compile and per measurement); TRITON_SEED: its --seed.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${1:-$ROOT/runs/gpu_check}"
VENV="${GPU_CHECK_VENV:-$ROOT/.venv-gpu-check}"
CUDA_TRIALS="${CUDA_TRIALS:-16}"
TRITON_TRIALS="${TRITON_TRIALS:-12}"
TESTS_SECS="${TESTS_SECS:-300}"
CUDA_SECS="${CUDA_SECS:-300}"
TRITON_SECS="${TRITON_SECS:-300}"
VALIDATE_SECS="${VALIDATE_SECS:-120}"
TRITON_COMPILE_SECS="${TRITON_COMPILE_SECS:-120}"
mkdir -p "$OUT"
cd "$ROOT"

say() { printf '\n=== %s (%s)\n' "$1" "$(date -u +%H:%M:%S)"; }
# limited SECONDS COMMAND...: the command under a time limit (killed with its children after it)
limited() {
  local secs="$1"; shift
  if [ "$secs" -le 0 ]; then echo "(skipped: its time limit is 0)"; return 0; fi
  timeout --kill-after=10 "$secs" "$@"
}

say "GPU"
nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader | tee "$OUT/gpu.txt"
CAP="$(head -n 1 "$OUT/gpu.txt" | awk -F', ' '{print $3}' | tr -d '.')"
# Triton compiles capability 90 and newer for the "a" variant
if [ "$CAP" -ge 90 ]; then ARCH="sm_${CAP}a"; else ARCH="sm_${CAP}"; fi
echo "arch: $ARCH"

if [ -n "${GPU_CHECK_PYTHON:-}" ]; then
  say "interpreter $GPU_CHECK_PYTHON as it is"
  PY="$(command -v "$GPU_CHECK_PYTHON")"
  export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
else
  say "venv $VENV"
  if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
  fi
  "$VENV/bin/python" -m pip install -q --upgrade pip
  "$VENV/bin/python" -m pip install -q -e ".[gpu,cuda,triton,dev]"
  PY="$VENV/bin/python"
  export PYTHONPATH="$ROOT"
  # nvcc from the cuda extra's wheels (the NVCC example needs one); ciq-optuna finds it there too
  NVCC_BIN="$("$PY" -c 'from ciq_optuna.compilers import find_compiler; print(find_compiler("nvcc").path.parent)')"
  export PATH="$NVCC_BIN:$PATH"
fi
"$PY" - <<'PYEOF' 2>&1 | tee "$OUT/versions.txt"
import sys, importlib
print("python", sys.version.split()[0])
for name in ("optuna", "numpy", "cupy", "triton", "scipy"):
    try:
        print(name, importlib.import_module(name).__version__)
    except Exception as exc:
        print(name, "missing:", exc)
from ciq_optuna.compilers import find_compiler
nvcc = find_compiler("nvcc")
print("nvcc", nvcc.release, nvcc.path)
PYEOF

say "Triton kernel: matmul, meta-parameters + ptxas controls, $TRITON_TRIALS trials for time_ratio"
TRITON_DB="sqlite:///$OUT/triton.db"
limited "$TRITON_SECS" "$PY" -m ciq_optuna.cli tune examples/triton/matmul.py:matmul_kernel --arch "$ARCH" --minimize time_ratio \
  --trials "$TRITON_TRIALS" ${TRITON_SEED:+--seed "$TRITON_SEED"} --storage "$TRITON_DB" --acf "$OUT/matmul_kernel.acf" --timeout "$TRITON_COMPILE_SECS" \
  -v 2>&1 | tee "$OUT/triton.txt" || echo "(the Triton run failed: see $OUT/triton.txt)"

say "CUDA kernel: sgemm.cu, ptxas controls through nvcc, $CUDA_TRIALS trials for time_ratio"
limited "$CUDA_SECS" "$PY" examples/gpu/nvcc_gemm/tune_nvcc.py --trials "$CUDA_TRIALS" --arch "$ARCH" --out "$OUT/nvcc" \
  --no-validate --summary "$OUT/nvcc/summary.json" 2>&1 | tee "$OUT/nvcc.txt" || echo "(the CUDA run failed: see $OUT/nvcc.txt)"

say "validate the winners"
if [ -f "$OUT/nvcc/best.acf" ]; then
  limited "$VALIDATE_SECS" "$PY" -m ciq_optuna.cli validate "$OUT/nvcc/best.acf" --launch examples/gpu/nvcc_gemm/gemm_launch.py:gemm_launch \
    --kernel examples/gpu/nvcc_gemm/sgemm.cu --arch "$ARCH" --sessions 2 --repeats 100 --warmup 20 \
    2>&1 | tee "$OUT/validate-nvcc.txt" || true
fi
if [ -f "$OUT/matmul_kernel.acf" ]; then
  limited "$VALIDATE_SECS" "$PY" -m ciq_optuna.cli validate "$OUT/matmul_kernel.acf" --kernel examples/triton/matmul.py:matmul_kernel \
    --sessions 2 --repeats 100 --warmup 20 2>&1 | tee "$OUT/validate-triton.txt" || true
fi

say "gpu-marked tests"
limited "$TESTS_SECS" "$PY" -m pytest -q -m gpu -p no:cacheprovider -o addopts= \
  tests/test_gpu_device.py tests/test_check_gpu.py tests/test_gpu_triton.py tests/test_gpu_correctness.py 2>&1 | tee "$OUT/pytest-gpu.txt" \
  || echo "(some gpu tests failed or ran out of time: see $OUT/pytest-gpu.txt)"

say "results"
"$PY" benchmarks/gpu_check_report.py --nvcc-summary "$OUT/nvcc/summary.json" \
  --triton-storage "$TRITON_DB" --triton-acf "$OUT/matmul_kernel.acf" | tee "$OUT/results.md"
