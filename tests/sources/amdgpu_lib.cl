// The external function amdgpu_kernels.cl calls; linked with it by ld.lld -shared.

__constant float lib_factor = 2.5f;

__attribute__((noinline)) float lib_scale(float x) { return x * lib_factor; }
