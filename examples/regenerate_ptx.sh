#!/bin/sh
# Regenerate the committed PTX of the example kernels from their CUDA sources.
# Usage: examples/regenerate_ptx.sh [path/to/nvcc]   (default: /usr/local/cuda/bin/nvcc, CUDA 13.0)
set -eu
NVCC=${1:-/usr/local/cuda/bin/nvcc}
cd "$(dirname "$0")"
for name in sgemm attention stencil; do
    for arch in sm_80 sm_90a; do
        "$NVCC" -ptx -arch="$arch" -o "$name/$name.$arch.ptx" "$name/$name.cu"
        echo "wrote examples/$name/$name.$arch.ptx"
    done
done
