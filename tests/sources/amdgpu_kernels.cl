// OpenCL C test kernels for devbin's AMDGPU code-object reader; see README.md.
// Compiled at test time with clang-19 -target amdgcn-amd-amdhsa -nogpulib -cl-std=CL2.0 -c.
// -nogpulib means no device library: OpenCL work-item builtins (get_global_id, barrier,
// atomic_inc) would stay undefined, so the kernels use clang's __builtin_amdgcn_* instead.

static inline int global_id_x(void) {
    return __builtin_amdgcn_workgroup_id_x() * __builtin_amdgcn_workgroup_size_x() + __builtin_amdgcn_workitem_id_x();
}

// Defined in amdgpu_lib.cl: undefined in this object, resolved by ld.lld -shared.
extern float lib_scale(float x);

// A helper that stays a real function (an s_swappc call in the kernels).
__attribute__((noinline)) float helper_square(float x) { return x * x; }

// A program-scope global variable (needs OpenCL 2.0): a .bss symbol and relocations.
__global int call_count;

__attribute__((reqd_work_group_size(64, 1, 1)))
__kernel void saxpy(int n, float a, __global const float *x, __global float *y) {
    int i = global_id_x();
    if (i < n) y[i] = a * x[i] + y[i];
}

__kernel void square_all(int n, __global float *v) {
    int i = global_id_x();
    if (i < n) v[i] = helper_square(v[i]);
}

__kernel void scale_ext(int n, __global float *v) {
    int i = global_id_x();
    if (i < n) v[i] = lib_scale(v[i]);
    if (i == 0) __atomic_fetch_add(&call_count, 1, __ATOMIC_RELAXED);
}

// LDS (group segment) usage and a barrier.
__kernel void block_reverse(__global float *v) {
    __local float tile[256];
    int t = __builtin_amdgcn_workitem_id_x();
    int base = __builtin_amdgcn_workgroup_id_x() * 256;
    tile[t] = v[base + t];
    __builtin_amdgcn_s_barrier();
    v[base + t] = tile[255 - t];
}
