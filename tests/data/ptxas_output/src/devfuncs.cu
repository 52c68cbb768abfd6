// Test kernels for the ptxas -v parser: device functions that are not inlined, a template,
// printf, a local array, recursion and (sm_90+) a cluster kernel with shared memory.
#include <cstdio>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define CLUSTER __cluster_dims__(2, 1, 1)
#else
#define CLUSTER
#endif

__device__ __noinline__ float helper(float x, int n)
{
    float s = 0;
    for (int i = 0; i < n; ++i) s += sinf(x * i);
    return s;
}

__device__ __noinline__ int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

template <int N>
__global__ void tmpl_kernel(float* out)
{
    float a[N];
    for (int i = 0; i < N; ++i) a[i] = out[i * threadIdx.x];
    out[threadIdx.x] = a[threadIdx.x % N] + helper(a[0], N);
}
template __global__ void tmpl_kernel<16>(float*);

extern "C" __global__ void fib_kernel(int* out) { out[threadIdx.x] = fib(out[threadIdx.x]); }

extern "C" __global__ void printf_kernel(float v) { printf("v=%f %d\n", v, threadIdx.x); }

extern "C" __global__ void local_array_kernel(float* out, int k)
{
    float a[64];
    for (int i = 0; i < 64; ++i) a[i] = out[i];
    out[threadIdx.x] = a[k];
}

__global__ void CLUSTER cluster_kernel(float* out)
{
    __shared__ float s[256];
    s[threadIdx.x] = out[threadIdx.x];
    __syncthreads();
    out[threadIdx.x] = s[255 - threadIdx.x];
}
