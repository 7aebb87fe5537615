// devbin link tests (NVIDIA): the second object of the program in prog.cu.

extern "C" {

__device__ __noinline__ int lib_twice(int x) { return 2 * x; }

__device__ __noinline__ int lib_unused(int x) { return x + 1000; }

__global__ void k_lib(int *out) { out[threadIdx.x] = lib_twice(out[threadIdx.x]); }

}  // extern "C"
