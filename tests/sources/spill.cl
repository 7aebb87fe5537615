// Register pressure for devbin's resource tests (tests/test_api_resources.py): amdgpu_num_vgpr(24)
// caps the kernel's VGPRs, so LLVM spills (the metadata note's .vgpr_spill_count is not 0);
// `calm` spills nothing.
__attribute__((amdgpu_num_vgpr(24), amdgpu_num_sgpr(32)))
__kernel void pressure(__global float *out, __global const float *in, int n) {
    int t = __builtin_amdgcn_workitem_id_x();
    float acc[64];
#pragma unroll
    for (int i = 0; i < 64; i++) acc[i] = in[i * n + t];
    for (int j = 0; j < n; j++) {
#pragma unroll
        for (int i = 0; i < 64; i++) acc[i] = acc[i] * acc[(i + j) & 63] + 1.0f;
    }
    float s = 0;
#pragma unroll
    for (int i = 0; i < 64; i++) s += acc[i];
    out[t] = s;
}

__kernel void calm(__global float *out) { out[__builtin_amdgcn_workitem_id_x()] = 1.0f; }
