// devbin link tests (NVIDIA): one translation unit of a multi-object program.
// Built at test time with nvcc -rdc=true -arch=sm_90 -cubin (tests/test_link_nvidia.py).
// Every function is extern "C" so cubin symbols read as written here.

extern "C" {

// Defined in lib.cu: a cross-object call.
extern __device__ int lib_twice(int x);

__device__ __noinline__ int leaf(int x) { return x ^ 0x5a; }

// Shared by k_direct and k_other.
__device__ __noinline__ int helper(int x) { return leaf(x) + 3; }

// Non-tail recursion: ptxas keeps the self call.
__device__ __noinline__ int rec_fib(int n) { return n < 2 ? n : rec_fib(n - 1) + rec_fib(n - 2); }

// Mutual recursion.
__device__ __noinline__ int ping(int n);
__device__ __noinline__ int pong(int n) { return n <= 0 ? 0 : 1 + ping(n - 2); }
__device__ __noinline__ int ping(int n) { return n <= 0 ? 0 : 2 + pong(n - 1); }

// int(int) functions reached through int_ops.
__device__ __noinline__ int op_inc(int x) { return x + 1; }
__device__ __noinline__ int op_dbl(int x) { return x * 2; }

// float(float, float) functions reached through flt_ops.
__device__ __noinline__ float fop_add(float a, float b) { return a + b; }
__device__ __noinline__ float fop_mul(float a, float b) { return a * b; }

// void(int*) functions in a table that no kernel reads.
__device__ __noinline__ void vop_zero(int *p) { *p = 0; }
__device__ __noinline__ void vop_one(int *p) { *p = 1; }

// Never called, never address-taken.
__device__ __noinline__ int unused_dev(int x) { return x * 77 + 1; }

// A function whose address a kernel takes in code (no table).
__device__ __noinline__ int taken_in_code(int x) { return x - 9; }

typedef int (*iop_t)(int);
typedef float (*fop_t)(float, float);
typedef void (*vop_t)(int *);

__device__ iop_t int_ops[2] = {op_inc, op_dbl};
__device__ fop_t flt_ops[2] = {fop_add, fop_mul};
__device__ vop_t void_ops[2] = {vop_zero, vop_one};

__global__ void k_direct(int *out) { out[threadIdx.x] = helper(out[threadIdx.x]); }

__global__ void k_other(int *out) { out[threadIdx.x] = helper(out[threadIdx.x] + 1) + lib_twice(3); }

__global__ void k_recursive(int *out, int n) { out[threadIdx.x] = rec_fib(n + (int)threadIdx.x) + ping(n); }

__global__ void k_int_table(int *out, int which) { out[threadIdx.x] = int_ops[which & 1](out[threadIdx.x]); }

__global__ void k_flt_table(float *out, int which) {
    out[threadIdx.x] = flt_ops[which & 1](out[threadIdx.x], 2.0f);
}

__global__ void k_takes_address(iop_t *slot, int *out) {
    slot[0] = taken_in_code;
    out[threadIdx.x] = slot[1](out[threadIdx.x]);
}

__global__ void k_shared(int *out) {
    __shared__ int tile[128];
    tile[threadIdx.x] = out[threadIdx.x];
    __syncthreads();
    out[threadIdx.x] = tile[127 - threadIdx.x];
}

}  // extern "C"
