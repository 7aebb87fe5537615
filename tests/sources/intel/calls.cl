// Non-kernel functions.  Built with IGC_FunctionControl=3 (IGC's "force stack calls"), IGC keeps
// helper and helper2 as functions (STT_FUNC symbols inside the kernel's section) and marks the
// kernel has_stack_calls.
__attribute__((noinline)) float helper(float x, int n) {
    float acc = 0.0f;
    for (int i = 0; i < n; i++)
        acc += x * i;
    return acc;
}

__attribute__((noinline)) float helper2(float x) { return helper(x, 7) * 2.0f; }

kernel void calls(global float *a, int n) {
    size_t i = get_global_id(0);
    a[i] = helper2(a[i]) + helper(a[i], n);
}
