// Stack frames, spills, recursion and C++ (mangled) names for `devbin resources` (tests/test_nvidia_cli.py).
// Built with `nvcc -cubin -rdc=true -maxrregcount=32`, then linked alone by nvlink: `deep_sum` is recursive
// with a frame, so nvlink writes EIATTR_MIN_STACK_SIZE 0xffffffff for `recursive_sum` (cuobjdump:
// STACK:UNKNOWN); `big_frame` keeps a local array (its EIATTR_FRAME_SIZE is non-zero while the
// relocatable cubin's stack, EIATTR_MAX_STACK_SIZE, is 0); `pressure` spills under 32 registers.
namespace devbin_tests {
namespace frames {

template <int N>
__device__ __noinline__ float big_frame(const float *p, int n) {
    float a[N];
    for (int i = 0; i < N; i++) a[i] = p[i * n];
    float s = 0;
    for (int i = 0; i < n; i++) s += a[(i * 7) % N];
    return s;
}

__device__ __noinline__ int deep_sum(int n, volatile int *p) {
    int a[16];
    for (int i = 0; i < 16; i++) a[i] = p[i * n];
    int r = n <= 1 ? 0 : deep_sum(n - 1, p);
    return a[n & 15] + r;
}

__global__ void uses_big_frame(float *out, const float *in, int n) { out[threadIdx.x] = big_frame<96>(in, n); }

__global__ void recursive_sum(int n, int *out) { out[threadIdx.x] = deep_sum(n, out); }

__global__ void pressure(float *out, const float *in, int n) {
    float acc[64];
#pragma unroll
    for (int i = 0; i < 64; i++) acc[i] = in[i * n + threadIdx.x];
    for (int j = 0; j < n; j++) {
#pragma unroll
        for (int i = 0; i < 64; i++) acc[i] = acc[i] * acc[(i + j) & 63] + 1.0f;
    }
    float s = 0;
#pragma unroll
    for (int i = 0; i < 64; i++) s += acc[i];
    out[threadIdx.x] = s;
}

}  // namespace frames
}  // namespace devbin_tests
