// A minimal HIP translation unit that needs no HIP headers (-nogpuinc -nogpulib): the two
// attributes, and the one runtime declaration clang's HIP front end requires before it
// accepts a __global__ function.  Compiled twice at test time, with -DNAME=square and
// -DNAME=cube (the latter with --offload-compress), and linked into one .so, so that
// .hip_fatbin holds two bundles back to back (see tests/test_hip_real.py).
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
struct dim3 { unsigned x, y, z; };
extern "C" int hipLaunchKernel(const void *f, dim3 grid, dim3 block, void **args, unsigned long shm, void *stream);

#ifndef NAME
#define NAME square
#endif
#define HELPER2(n) n##_helper
#define HELPER(n) HELPER2(n)

__device__ __attribute__((noinline)) float HELPER(NAME)(float x) { return x * x; }
extern "C" __global__ void NAME(float *v) { v[0] = HELPER(NAME)(v[0]); }
