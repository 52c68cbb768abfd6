// 3D 25-point star stencil, 8th order in space (radius 4 along x, y and z), one time step:
// out = c0 * in + sum_{r=1..4} c_r * (six neighbours at distance r).
//
// 2.5D blocking: a 32 x 8 block walks along z. The x-y plane it works on sits in shared memory
// with a halo of 4; the z neighbours of each thread's column live in a register queue of 9 values
// (4 behind, the centre, 4 in front) that shifts by one each step. Each thread computes Y_PER
// = 2 points in y, so it carries two queues (18 values) plus their halo loads and the
// coefficients. Grid sizes are multiples of the block tile; the halo of the whole grid is
// read but not written (the caller pads the volume by 4 on every side).

#define R 4
#define BX 32
#define BY 8
#define Y_PER 2
#define TILE_Y (BY * Y_PER)

__constant__ float c_coef[R + 1];

extern "C" __global__ void stencil25_3d(const float* __restrict__ in, float* __restrict__ out,
                                        int nx, int ny, int nz)
{
    // nx, ny, nz include the padding of R on each side.
    __shared__ float plane[TILE_Y + 2 * R][BX + 2 * R];

    const int tx = threadIdx.x, ty = threadIdx.y;
    const int gx = blockIdx.x * BX + tx + R;
    const int gy0 = blockIdx.y * TILE_Y + ty * Y_PER + R;
    const size_t stride_z = (size_t)nx * ny;

    float coef[R + 1];
#pragma unroll
    for (int r = 0; r <= R; ++r) coef[r] = c_coef[r];

    float queue[Y_PER][2 * R + 1];
#pragma unroll
    for (int p = 0; p < Y_PER; ++p)
#pragma unroll
        for (int i = 0; i < 2 * R; ++i) queue[p][i + 1] = in[(size_t)i * stride_z + (size_t)(gy0 + p) * nx + gx];

    for (int z = R; z < nz - R; ++z) {
#pragma unroll
        for (int p = 0; p < Y_PER; ++p) {
#pragma unroll
            for (int i = 0; i < 2 * R; ++i) queue[p][i] = queue[p][i + 1];
            queue[p][2 * R] = in[(size_t)(z + R) * stride_z + (size_t)(gy0 + p) * nx + gx];
        }
        __syncthreads();
        const size_t zoff = (size_t)z * stride_z;
#pragma unroll
        for (int p = 0; p < Y_PER; ++p) {
            const int sy = ty * Y_PER + p + R;
            plane[sy][tx + R] = queue[p][R];
            if (tx < R) {
                plane[sy][tx] = in[zoff + (size_t)(gy0 + p) * nx + gx - R];
                plane[sy][tx + BX + R] = in[zoff + (size_t)(gy0 + p) * nx + gx + BX];
            }
        }
        if (ty < R) {
            // The first R thread rows load the y halo above and below the tile.
            const int gy_lo = blockIdx.y * TILE_Y + ty;
            const int gy_hi = blockIdx.y * TILE_Y + TILE_Y + R + ty;
            plane[ty][tx + R] = in[zoff + (size_t)gy_lo * nx + gx];
            plane[TILE_Y + R + ty][tx + R] = in[zoff + (size_t)gy_hi * nx + gx];
        }
        __syncthreads();
#pragma unroll
        for (int p = 0; p < Y_PER; ++p) {
            const int sy = ty * Y_PER + p + R, sx = tx + R;
            float v = coef[0] * queue[p][R];
#pragma unroll
            for (int r = 1; r <= R; ++r) {
                v = fmaf(coef[r], queue[p][R - r] + queue[p][R + r], v);
                v = fmaf(coef[r], plane[sy][sx - r] + plane[sy][sx + r], v);
                v = fmaf(coef[r], plane[sy - r][sx] + plane[sy + r][sx], v);
            }
            out[zoff + (size_t)(gy0 + p) * nx + gx] = v;
        }
    }
}
