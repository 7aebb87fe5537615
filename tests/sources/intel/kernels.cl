// devbin's Intel test kernels (tests/intelbuild.py compiles them with ocloc at test time).

// Plain kernel: no SLM, no barrier; the compiler picks the SIMD width.
kernel void vadd(global const float *a, global const float *b, global float *c) {
    size_t i = get_global_id(0);
    c[i] = a[i] + b[i];
}

// Static SLM (64 floats = 256 bytes), one barrier, required work-group and sub-group sizes.
__attribute__((reqd_work_group_size(64, 1, 1)))
__attribute__((intel_reqd_sub_group_size(16)))
kernel void reduce_slm(global const float *in, global float *out) {
    local float tmp[64];
    size_t l = get_local_id(0);
    tmp[l] = in[get_global_id(0)];
    barrier(CLK_LOCAL_MEM_FENCE);
    if (l == 0) {
        float s = 0.0f;
        for (int j = 0; j < 64; j++)
            s += tmp[j];
        out[get_group_id(0)] = s;
    }
}

// A private array indexed by data: stateless private memory (per_thread_memory_buffers global/private_space).
kernel void priv2(global float *a, int n) {
    float p[512];
    size_t i = get_global_id(0);
    for (int j = 0; j < 512; j++)
        p[j] = a[(i + j) % n];
    a[i] = p[(int)a[i] & 511];
}
