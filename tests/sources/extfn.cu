// Defines the extern __device__ function that kernels.cu calls (scale_ext).
// Linking the two relocatable cubins with nvlink resolves the reference.

extern "C" {

__device__ float ext_scale_factor = 2.5f;

__device__ __noinline__ float ext_scale(float x) { return x * ext_scale_factor; }

}  // extern "C"
