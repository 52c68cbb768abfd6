// Tiled single-precision GEMM, C = alpha * A * B + beta * C (row-major, M, N, K multiples of the tiles).
//
// A 256-thread block computes a 128 x 128 tile of C; each thread owns an 8 x 8 register tile of
// accumulators (64 floats) plus two 8-float fragments of A and B per k step, so the kernel lives
// close to the register limit. __launch_bounds__(256, 2) asks for two blocks per SM, which caps
// ptxas at 128 registers: the cap, --maxrregcount (with --override-directive-values) and the
// optimisation level decide how much spills.

#define BM 128
#define BN 128
#define BK 8
#define TM 8
#define TN 8
#define THREADS 256

extern "C" __global__ void __launch_bounds__(THREADS, 2)
sgemm_128x128x8(int M, int N, int K, float alpha, const float* __restrict__ A,
                const float* __restrict__ B, float beta, float* __restrict__ C)
{
    __shared__ float As[2][BK][BM];  // A tile stored transposed: As[k][m]
    __shared__ float Bs[2][BK][BN];

    const int tid = threadIdx.x;
    const int tx = tid % (BN / TN);  // 16 threads across N
    const int ty = tid / (BN / TN);  // 16 threads down M
    const int block_m = blockIdx.y * BM;
    const int block_n = blockIdx.x * BN;

    // Each thread loads 4 elements of the A tile (128 x 8) and 4 of the B tile (8 x 128).
    const int a_row = tid / 2, a_col = (tid % 2) * 4;
    const int b_row = tid / 32, b_col = (tid % 32) * 4;
    const float* a_ptr = A + (size_t)(block_m + a_row) * K + a_col;
    const float* b_ptr = B + (size_t)b_row * N + block_n + b_col;

    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

    float4 a_ld = *reinterpret_cast<const float4*>(a_ptr);
    float4 b_ld = *reinterpret_cast<const float4*>(b_ptr);
    int buf = 0;
    As[buf][a_col + 0][a_row] = a_ld.x;
    As[buf][a_col + 1][a_row] = a_ld.y;
    As[buf][a_col + 2][a_row] = a_ld.z;
    As[buf][a_col + 3][a_row] = a_ld.w;
    *reinterpret_cast<float4*>(&Bs[buf][b_row][b_col]) = b_ld;
    __syncthreads();

    for (int k0 = 0; k0 < K; k0 += BK) {
        const bool more = k0 + BK < K;
        if (more) {  // prefetch the next tiles into registers while computing this one
            a_ld = *reinterpret_cast<const float4*>(a_ptr + k0 + BK);
            b_ld = *reinterpret_cast<const float4*>(b_ptr + (size_t)(k0 + BK) * N);
        }
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            float a_frag[TM], b_frag[TN];
            const float4 a0 = *reinterpret_cast<const float4*>(&As[buf][k][ty * TM]);
            const float4 a1 = *reinterpret_cast<const float4*>(&As[buf][k][ty * TM + 4]);
            const float4 b0 = *reinterpret_cast<const float4*>(&Bs[buf][k][tx * TN]);
            const float4 b1 = *reinterpret_cast<const float4*>(&Bs[buf][k][tx * TN + 4]);
            a_frag[0] = a0.x; a_frag[1] = a0.y; a_frag[2] = a0.z; a_frag[3] = a0.w;
            a_frag[4] = a1.x; a_frag[5] = a1.y; a_frag[6] = a1.z; a_frag[7] = a1.w;
            b_frag[0] = b0.x; b_frag[1] = b0.y; b_frag[2] = b0.z; b_frag[3] = b0.w;
            b_frag[4] = b1.x; b_frag[5] = b1.y; b_frag[6] = b1.z; b_frag[7] = b1.w;
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a_frag[i], b_frag[j], acc[i][j]);
        }
        if (more) {
            buf ^= 1;
            As[buf][a_col + 0][a_row] = a_ld.x;
            As[buf][a_col + 1][a_row] = a_ld.y;
            As[buf][a_col + 2][a_row] = a_ld.z;
            As[buf][a_col + 3][a_row] = a_ld.w;
            *reinterpret_cast<float4*>(&Bs[buf][b_row][b_col]) = b_ld;
        }
        __syncthreads();
    }

#pragma unroll
    for (int i = 0; i < TM; ++i) {
        float* c_row = C + (size_t)(block_m + ty * TM + i) * N + block_n + tx * TN;
#pragma unroll
        for (int j = 0; j < TN; j += 4) {
            float4 c = *reinterpret_cast<float4*>(c_row + j);
            c.x = alpha * acc[i][j + 0] + beta * c.x;
            c.y = alpha * acc[i][j + 1] + beta * c.y;
            c.z = alpha * acc[i][j + 2] + beta * c.z;
            c.w = alpha * acc[i][j + 3] + beta * c.w;
            *reinterpret_cast<float4*>(c_row + j) = c;
        }
    }
}
