/* A user code object that calls into lib.cl's code object (devbin.load tests).
 *
 * Linked alone with ld.lld -shared (undefined default-visibility symbols are allowed in a
 * shared object), so these stay undefined in its .dynsym and need the loader:
 *   lib_scale   called through a GOT slot (R_AMDGPU_ABS64) and stored in user_table[2]
 *   lib_offset  stored in user_table[1] (address taken across code objects)
 *   lib_counter GOT slot for the atomic, and user_counter_ptr's initializer
 * user_helper is hidden: local in the .so, called directly, and user_table[0] holds its
 * address (R_AMDGPU_RELATIVE64).
 */
#pragma OPENCL EXTENSION __cl_clang_function_pointers : enable
#define EXPORT __attribute__((visibility("default")))
typedef float (*fn_t)(float);

extern EXPORT float lib_scale(float x);
extern EXPORT float lib_offset(float x);
extern EXPORT __global int lib_counter;

__attribute__((noinline)) float user_helper(float x) { return x - 3.0f; }

__global fn_t user_table[3] = {user_helper, lib_offset, lib_scale};
__global int *user_counter_ptr = &lib_counter;

__kernel void user_kern(__global float *v, int which)
{
    int t = __builtin_amdgcn_workitem_id_x();
    v[t] = lib_scale(v[t]) + user_table[which % 3](v[t]) + user_helper(v[t]);
    __atomic_fetch_add(&lib_counter, 1, __ATOMIC_RELAXED);
}
