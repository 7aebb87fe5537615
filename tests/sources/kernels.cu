// Test kernels for devbin: compiled at test time (nvcc) or from committed PTX (ptxas).
// Each kernel exercises one feature a cubin reader must handle; see README.md.

extern "C" {

#ifdef __CUDACC_RDC__
// Defined in extfn.cu: an unresolved symbol in the relocatable cubin.
extern __device__ float ext_scale(float x);
#endif

// A non-inlined device function called from a kernel (a call-graph edge).
__device__ __noinline__ float helper_square(float x) { return x * x; }

// A recursive device function (stack frame, self call edge).
__device__ __noinline__ int fact(int n) { return n <= 1 ? 1 : n * fact(n - 1); }

__device__ __noinline__ float op_add(float a, float b) { return a + b; }
__device__ __noinline__ float op_mul(float a, float b) { return a * b; }
__device__ __noinline__ float op_sub(float a, float b) { return a - b; }

typedef float (*binop_t)(float, float);

// A function-pointer table in global memory (relocations against device functions).
__device__ binop_t op_table[3] = {op_add, op_mul, op_sub};

// A global variable (a .nv.global.init / .nv.global symbol).
__device__ int launch_counter;

// __launch_bounds__: max threads per block and min blocks per SM (EIATTR_MAX_THREADS etc.).
__global__ void __launch_bounds__(128, 4) saxpy_bounded(int n, float a, const float *x, float *y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

// Calls a local __device__ function.
__global__ void square_all(int n, float *v) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) v[i] = helper_square(v[i]);
}

#ifdef __CUDACC_RDC__
// Calls an extern __device__ function: only in relocatable builds (-rdc=true), where the
// reference stays unresolved in the cubin until nvlink links it with extfn.cu.
__global__ void scale_ext(int n, float *v) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) v[i] = ext_scale(v[i]);
}
#endif

// Static shared memory and a barrier (.nv.shared.<kernel> section).
__global__ void block_reverse(float *v) {
    __shared__ float tile[256];
    unsigned t = threadIdx.x;
    tile[t] = v[blockIdx.x * 256 + t];
    __syncthreads();
    v[blockIdx.x * 256 + t] = tile[255 - t];
}

// Indirect call through the function-pointer table.
__global__ void apply_op(int n, int which, const float *a, const float *b, float *out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    binop_t f = op_table[which % 3];
    if (i < n) out[i] = f(a[i], b[i]);
    if (i == 0) atomicAdd(&launch_counter, 1);
}

// Calls the recursive device function.
__global__ void factorials(int n, int *out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = fact(i % 12);
}

}  // extern "C"
