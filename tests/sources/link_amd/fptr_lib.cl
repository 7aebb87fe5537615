/* Device functions and a variable for fptr_main.cl (see there). */
#define EXPORT __attribute__((visibility("default")))

EXPORT int lib_inc(int x) { return x + 1; }
EXPORT int lib_dbl(int x) { return x * 2; }
__attribute__((noinline)) int lib_fact(int n) { return n <= 1 ? 1 : n * lib_fact(n - 1); }
__attribute__((noinline)) int lib_leaf(int x) { return x ^ 5; }
EXPORT __global int lib_counter = 0;
