/* A device-function library in its own code object (devbin.load tests, tests/test_load.py).
 *
 * Exported (default visibility, so ld.lld -shared puts them in .dynsym and another code
 * object can bind to them): lib_scale, lib_offset, lib_square, lib_counter, lib_factor,
 * lib_table.  lib_private is hidden (local in the .so).  lib_table stores two function
 * addresses (R_AMDGPU_ABS64 in the .so); lib_scale reads lib_factor/lib_counter through
 * the GOT (preemptible symbols).  lib_kern is a kernel of the library itself.
 */
#pragma OPENCL EXTENSION __cl_clang_function_pointers : enable
#define EXPORT __attribute__((visibility("default")))
typedef float (*fn_t)(float);

EXPORT __global int lib_counter = 7;
EXPORT __global float lib_factor = 2.5f;

__attribute__((noinline)) EXPORT float lib_scale(float x) { return x * lib_factor + (float)lib_counter; }
__attribute__((noinline)) EXPORT float lib_offset(float x) { return x + 1.0f; }
__attribute__((noinline)) static float lib_private(float x) { return x * x; }
__attribute__((noinline)) EXPORT float lib_square(float x) { return lib_private(x); }

EXPORT __global fn_t lib_table[2] = {lib_offset, lib_square};

__kernel void lib_kern(__global float *v)
{
    int t = __builtin_amdgcn_workitem_id_x();
    v[t] = lib_scale(v[t]);
}
