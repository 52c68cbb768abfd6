// Fused attention forward for one head: O = softmax(Q K^T * scale) V, row by row, in one pass.
//
// Each thread owns one query row: the row of Q and the running output row live in registers
// (2 x HEAD_DIM floats), and the block streams K and V through shared memory in tiles of
// KV_TILE keys, updating a numerically stable online softmax (running max and sum). With
// HEAD_DIM = 128 the two rows alone need 256 registers, more than the 255 a thread may have, so
// ptxas must spill at every setting; how much, and what it keeps in registers, depends on its
// controls. Sequence lengths are multiples of the tiles.

#define HEAD_DIM 128
#define Q_TILE 64   // queries (threads) per block
#define KV_TILE 4   // keys per shared-memory tile (small: keeps the ptxas compile under a second)

extern "C" __global__ void attention_fwd_d128(const float* __restrict__ Q, const float* __restrict__ K,
                                              const float* __restrict__ V, float* __restrict__ O,
                                              int seq_len, float scale)
{
    __shared__ float Ks[KV_TILE][HEAD_DIM];
    __shared__ float Vs[KV_TILE][HEAD_DIM];

    const int row = blockIdx.x * Q_TILE + threadIdx.x;
    const float* q_row = Q + (size_t)row * HEAD_DIM;

    float q[HEAD_DIM], o[HEAD_DIM];
#pragma unroll
    for (int d = 0; d < HEAD_DIM; ++d) {
        q[d] = q_row[d] * scale;
        o[d] = 0.0f;
    }
    float running_max = -INFINITY, running_sum = 0.0f;

    for (int kv0 = 0; kv0 < seq_len; kv0 += KV_TILE) {
        for (int i = threadIdx.x; i < KV_TILE * HEAD_DIM; i += Q_TILE) {
            Ks[i / HEAD_DIM][i % HEAD_DIM] = K[(size_t)kv0 * HEAD_DIM + i];
            Vs[i / HEAD_DIM][i % HEAD_DIM] = V[(size_t)kv0 * HEAD_DIM + i];
        }
        __syncthreads();

        float s[KV_TILE];
        float tile_max = running_max;
#pragma unroll
        for (int j = 0; j < KV_TILE; ++j) {
            float dot = 0.0f;
#pragma unroll
            for (int d = 0; d < HEAD_DIM; ++d) dot = fmaf(q[d], Ks[j][d], dot);
            s[j] = dot;
            tile_max = fmaxf(tile_max, dot);
        }
        const float correction = __expf(running_max - tile_max);
        running_sum *= correction;
#pragma unroll
        for (int d = 0; d < HEAD_DIM; ++d) o[d] *= correction;
#pragma unroll
        for (int j = 0; j < KV_TILE; ++j) {
            const float p = __expf(s[j] - tile_max);
            running_sum += p;
#pragma unroll
            for (int d = 0; d < HEAD_DIM; ++d) o[d] = fmaf(p, Vs[j][d], o[d]);
        }
        running_max = tile_max;
        __syncthreads();
    }

    const float inv_sum = 1.0f / running_sum;
    float* o_row = O + (size_t)row * HEAD_DIM;
#pragma unroll
    for (int d = 0; d < HEAD_DIM; ++d) o_row[d] = o[d] * inv_sum;
}
