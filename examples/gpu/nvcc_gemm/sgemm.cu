// Single-precision GEMM, C = A @ B (row-major, M, N, K multiples of 64 / 16), the ciq-optuna
// NVCC example kernel. 64x64 tile per block of 256 threads, 4x4 outputs per thread held in
// registers: register allocation and unrolling are exactly what ptxas controls change.
//
// Test-only macros (used by tests/test_gpu_device.py to prove the gates can fail):
//   CIQ_WRONG_RESULT     one output element is off by 1
//   CIQ_ILLEGAL_ADDRESS  a store far outside C (an illegal memory access)

#define BM 64
#define BN 64
#define BK 16
#define TM 4
#define TN 4
#define THREADS 256

extern "C" __global__ void __launch_bounds__(THREADS)
sgemm(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C, int M, int N, int K)
{
    __shared__ float As[BK][BM + 4];  // A tile, transposed: As[k][m]
    __shared__ float Bs[BK][BN + 4];
    const int tx = threadIdx.x % (BN / TN);
    const int ty = threadIdx.x / (BN / TN);
    const int row0 = blockIdx.y * BM;
    const int col0 = blockIdx.x * BN;
    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j)
            acc[i][j] = 0.0f;

    for (int k0 = 0; k0 < K; k0 += BK) {
        for (int e = threadIdx.x; e < BM * BK; e += THREADS) {
            const int m = e / BK, k = e % BK;
            As[k][m] = A[(size_t)(row0 + m) * K + k0 + k];
        }
        for (int e = threadIdx.x; e < BK * BN; e += THREADS) {
            const int k = e / BN, n = e % BN;
            Bs[k][n] = B[(size_t)(k0 + k) * N + col0 + n];
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            float a[TM], b[TN];
#pragma unroll
            for (int i = 0; i < TM; ++i)
                a[i] = As[k][ty * TM + i];
#pragma unroll
            for (int j = 0; j < TN; ++j)
                b[j] = Bs[k][tx * TN + j];
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j)
                    acc[i][j] += a[i] * b[j];
        }
        __syncthreads();
    }

#ifdef CIQ_WRONG_RESULT
    if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0)
        acc[0][0] += 1.0f;
#endif
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j)
            C[(size_t)(row0 + ty * TM + i) * N + col0 + tx * TN + j] = acc[i][j];
#ifdef CIQ_ILLEGAL_ADDRESS
    if (threadIdx.x == 0)
        C[(size_t)1 << 40] = acc[0][0];
#endif
}
