// Register pressure for devbin's resource tests (tests/test_api_resources.py): built with
// __launch_bounds__(1024, 2) (at most 32 registers), the kernel spills (ptxas -v prints non-zero "bytes spill stores") and the
// device function keeps a local array; `calm` spills nothing.  `descend` is recursive: ptxas -v reports
// spill bytes for it (the registers it keeps across its own call, saved on its stack frame) but marks no
// instruction SpillRefill, so the cubin records no spill for it (docs/API.md, footnote 2).
extern "C" __device__ __noinline__ float gather(const float *p, int n) {
    float a[32];
    for (int i = 0; i < 32; i++) a[i] = p[i * n];
    float s = 0;
    for (int i = 0; i < n; i++) s += a[i & 31];
    return s;
}

extern "C" __global__ void __launch_bounds__(1024, 2) pressure(float *out, const float *in, int n) {
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
    out[threadIdx.x] = s + gather(in, n);
}

extern "C" __global__ void calm(float *out) { out[threadIdx.x] = 1.0f; }

extern "C" __device__ __noinline__ float descend(const float *p, int n) {
    float a[5];
    for (int i = 0; i < 5; i++) a[i] = p[i * n];
    if (n <= 0) return a[0];
    return a[n % 5] + descend(p + 1, n - 1) * a[(n + 1) % 5];
}

extern "C" __global__ void recurse(float *out, const float *in, int n) { out[threadIdx.x] = descend(in, n); }
