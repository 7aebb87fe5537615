/* Kernels over function pointers, recursion and indirect calls across two objects (fptr_lib.cl);
 * tests/test_link_amdgpu_dce.py builds both with clang-19 and clang-22
 * (-fexperimental-call-graph-section), -ffunction-sections or not, and links with ld.lld.
 *
 *   k_table  indirect call through `table` (the addresses of lib_inc and lib_dbl, R_AMDGPU_ABS64
 *            from .data), and an atomic on lib_counter, a variable of the other object read
 *            through its GOT slot (R_AMDGPU_GOTPCREL32_LO/HI, like a call to an external function)
 *   k_fact   calls the recursive lib_fact
 *   k_local  calls the self-recursive static fib (same object)
 *   k_plain  calls nothing
 *   old_helper is called by no kernel; it calls lib_leaf, which nothing else calls.
 */
#pragma OPENCL EXTENSION __cl_clang_function_pointers : enable
#define EXPORT __attribute__((visibility("default")))
typedef int (*op_t)(int);

extern EXPORT int lib_inc(int x);
extern EXPORT int lib_dbl(int x);
extern int lib_fact(int n);
extern int lib_leaf(int x);
extern EXPORT __global int lib_counter;

__global op_t table[2] = {lib_inc, lib_dbl};

__attribute__((noinline)) int old_helper(int x) { return lib_leaf(x) + 3; }

__attribute__((noinline)) static int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

kernel void k_table(global int *out, int i)
{
    out[0] = table[i & 1](out[1]);
    __atomic_fetch_add(&lib_counter, 1, __ATOMIC_RELAXED);
}

kernel void k_fact(global int *out) { out[0] = lib_fact(out[1]); }

kernel void k_local(global int *out) { out[0] = fib(out[1]); }

kernel void k_plain(global int *out) { out[0] = 1; }
