// OpenCL C with function pointers and recursion, for devbin's AMDGPU call-graph tests.
// Compiled at test time with clang-19 (and clang-22 -fexperimental-call-graph-section):
//   -target amdgcn-amd-amdhsa -nogpulib -cl-std=CL2.0 -O2 -c
// The calls the tests expect, read off this file:
//   apply_table -> (indirect, through table[]) add_one | twice   : add_one, twice address-taken
//   fib_kernel  -> fib ; fib -> fib (not a tail call, so LLVM keeps the recursion)
//   not_taken: neither called nor address-taken.
#pragma OPENCL EXTENSION __cl_clang_function_pointers : enable

typedef int (*unary_fn)(int);

__attribute__((noinline)) int add_one(int x) { return x + 1; }
__attribute__((noinline)) int twice(int x) { return 2 * x; }
__attribute__((noinline)) float not_taken(float x) { return x * 3.0f; }
__attribute__((noinline)) int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

// The table holds the functions' addresses: R_AMDGPU_ABS64 relocations from data.
__constant unary_fn table[2] = {add_one, twice};

__kernel void apply_table(int which, __global int *v) {
    int t = __builtin_amdgcn_workitem_id_x();
    v[t] = table[which & 1](v[t]);
}

__kernel void fib_kernel(__global int *v) {
    int t = __builtin_amdgcn_workitem_id_x();
    v[t] = fib(v[t]);
}
