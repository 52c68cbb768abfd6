#!/usr/bin/env bash
# GPU check: on a machine with one NVIDIA GPU (driver installed) and Python 3.10+, from a checkout
# of this repository, in one unattended command:
#
#   bash benchmarks/gpu_check.sh [OUT_DIR]        (default OUT_DIR: runs/gpu_check)
#
# 1. a venv with the extras gpu (cupy, NVML), cuda (NVIDIA's compiler wheels), triton, dev (pytest);
# 2. the `gpu`-marked tests;
# 3. runtime tuning of one CUDA kernel (examples/gpu/nvcc_gemm, ptxas controls through nvcc) and
#    one Triton kernel (examples/triton/matmul.py, meta-parameters + ptxas controls), budgets sized
#    to fit in about 8 minutes together;
# 4. `ciq-optuna validate` of both winners (fresh processes, Welch + Holm);
# 5. a results table: baseline ms, best ms, speedup, validation verdict, trials, reused measurements.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${1:-$ROOT/runs/gpu_check}"
VENV="${GPU_CHECK_VENV:-$ROOT/.venv-gpu-check}"
CUDA_TRIALS="${CUDA_TRIALS:-16}"
TRITON_TRIALS="${TRITON_TRIALS:-12}"
mkdir -p "$OUT"
cd "$ROOT"

say() { printf '\n=== %s (%s)\n' "$1" "$(date -u +%H:%M:%S)"; }

say "GPU"
nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader | tee "$OUT/gpu.txt"
CAP="$(head -n 1 "$OUT/gpu.txt" | awk -F', ' '{print $3}' | tr -d '.')"
# Triton compiles capability 90 and newer for the "a" variant
if [ "$CAP" -ge 90 ]; then ARCH="sm_${CAP}a"; else ARCH="sm_${CAP}"; fi
echo "arch: $ARCH"

say "venv $VENV"
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q -e ".[gpu,cuda,triton,dev]"
# shellcheck disable=SC1091
. "$VENV/bin/activate"
export PYTHONPATH="$ROOT"
# nvcc from the cuda extra's wheels (the NVCC example needs one); ciq-optuna finds it there too
NVCC_BIN="$(python -c 'from ciq_optuna.compilers import find_compiler; print(find_compiler("nvcc").path.parent)')"
export PATH="$NVCC_BIN:$PATH"

say "gpu-marked tests"
python -m pytest -q -m gpu -p no:cacheprovider 2>&1 | tee "$OUT/pytest-gpu.txt" || echo "(some gpu tests failed: see $OUT/pytest-gpu.txt)"

say "CUDA kernel: sgemm.cu, ptxas controls through nvcc, $CUDA_TRIALS trials for time_ratio"
python examples/gpu/nvcc_gemm/tune_nvcc.py --trials "$CUDA_TRIALS" --arch "$ARCH" --out "$OUT/nvcc" \
  --no-validate --summary "$OUT/nvcc/summary.json" 2>&1 | tee "$OUT/nvcc.txt" || echo "(the CUDA run failed: see $OUT/nvcc.txt)"

say "Triton kernel: matmul, meta-parameters + ptxas controls, $TRITON_TRIALS trials for time_ratio"
TRITON_DB="sqlite:///$OUT/triton.db"
ciq-optuna tune examples/triton/matmul.py:matmul_kernel --arch "$ARCH" --minimize time_ratio \
  --trials "$TRITON_TRIALS" --storage "$TRITON_DB" --acf "$OUT/matmul_kernel.acf" --timeout 180 \
  --quiet 2>&1 | tee "$OUT/triton.txt" || echo "(the Triton run failed: see $OUT/triton.txt)"

say "validate the winners"
if [ -f "$OUT/nvcc/best.acf" ]; then
  ciq-optuna validate "$OUT/nvcc/best.acf" --launch examples/gpu/nvcc_gemm/gemm_launch.py:gemm_launch \
    --kernel examples/gpu/nvcc_gemm/sgemm.cu --arch "$ARCH" --sessions 2 --repeats 100 --warmup 20 \
    2>&1 | tee "$OUT/validate-nvcc.txt" || true
fi
if [ -f "$OUT/matmul_kernel.acf" ]; then
  ciq-optuna validate "$OUT/matmul_kernel.acf" --kernel examples/triton/matmul.py:matmul_kernel \
    --sessions 2 --repeats 100 --warmup 20 2>&1 | tee "$OUT/validate-triton.txt" || true
fi

say "results"
python benchmarks/gpu_check_report.py --nvcc-summary "$OUT/nvcc/summary.json" \
  --triton-storage "$TRITON_DB" --triton-acf "$OUT/matmul_kernel.acf" | tee "$OUT/results.md"
