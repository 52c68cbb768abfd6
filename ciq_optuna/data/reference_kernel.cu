// Reference kernel of `ciq-optuna spaces check`: small (compiles in well under a second),
// but every construct gives a compiler control something to act on: register pressure
// (maxrregcount, register-usage-level, -O), divisions and square roots (prec-div,
// prec-sqrt, ftz, use_fast_math), a separate PTX mul and add (ptxas --fmad), 64-bit
// division by constants (optimizer constants), loads and stores without cache operators
// (-dlcm, -dscm), a float atomic (--optimize-float-atomics), a switch (jump tables), a
// copy loop over possibly aliased pointers (--restrict, vectorisation), a non-inlined
// device function, one entry with full launch bounds (--override-directive-values) and one
// with a block size only (--minnctapersm acts on it without the override).
// PTX (CUDA 13.0 nvcc, PTX ISA 9.0, read by ptxas 13.0 and 13.5):
//   nvcc -arch=sm_XX -ptx reference_kernel.cu -o reference_kernel.sm_XX.ptx   (sm_75, sm_80, sm_90a)
#define N 24

__device__ __noinline__ float mix(float a, float b, int k)
{
    switch (k & 7) {
    case 0: return a + b;
    case 1: return a * b;
    case 2: return a - b;
    case 3: return fmaxf(a, b);
    case 4: return fminf(a, b);
    case 5: return a / (b + 1.0f);
    case 6: return sqrtf(fabsf(a * b));
    default: return a;
    }
}

extern "C" __global__ void ref_pressure(const float *a, const float *b, float *c, float *sum, int n)
{
    float acc[N];
    int t = blockIdx.x * blockDim.x + threadIdx.x;
#pragma unroll
    for (int i = 0; i < N; ++i) acc[i] = a[t * N + i];
    for (int k = 0; k < n; ++k) {
        float bk = b[k];
#pragma unroll
        for (int i = 0; i < N; ++i) acc[i] = acc[i] * bk + acc[(i + 5) % N] / (bk + 2.0f);
    }
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < N; ++i) {
        s += sqrtf(fabsf(acc[i])) + expf(acc[i] * 0.001f);
        c[t * N + i] = acc[i];
    }
    s = mix(s, a[t], t);
    atomicAdd(sum, s);
}

extern "C" __global__ void __launch_bounds__(256, 2)
ref_bounded(const float *a, const float *b, float *c, int n)
{
    float acc[N];
    int t = blockIdx.x * blockDim.x + threadIdx.x;
#pragma unroll
    for (int i = 0; i < N; ++i) acc[i] = a[t + i * n];
    for (int k = 0; k < n; ++k) {
#pragma unroll
        for (int i = 0; i < N; ++i) acc[i] = fmaf(acc[i], b[k * N + i], acc[(i + 3) % N]);
    }
    for (int i = 0; i < n; ++i) c[i] = a[i] * 2.0f + b[i];
#pragma unroll
    for (int i = 0; i < N; ++i) c[t + i * n] = acc[i];
}

extern "C" __global__ void __launch_bounds__(128)
ref_threads(const float *a, const float *b, float *c, int n)
{
    float acc[N];
    int t = blockIdx.x * blockDim.x + threadIdx.x;
#pragma unroll
    for (int i = 0; i < N; ++i) acc[i] = b[t * N + i];
    for (int k = 0; k < n; ++k) {
#pragma unroll
        for (int i = 0; i < N; ++i) acc[i] = fmaf(acc[i], a[k * N + i], acc[(i + 7) % N]);
    }
#pragma unroll
    for (int i = 0; i < N; ++i) c[t * N + i] = acc[i];
}

extern "C" __global__ void ref_misc(const long long *a, long long *c, const float *f, float *g)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    long long x = a[t];
    c[t] = x / 1234567891LL + x % 987654321LL;
    float y = f[t], z = f[t + 1], w = f[t + 2], r;
    // A PTX mul and add without rounding modifiers: only ptxas decides whether to fuse them.
    asm("{\n\t.reg .f32 m;\n\tmul.f32 m, %1, %2;\n\tadd.f32 %0, m, %3;\n\t}" : "=f"(r) : "f"(y), "f"(z), "f"(w));
    g[t] = r + sinf(y) / z + logf(w);
}
