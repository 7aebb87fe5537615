/* Device functions compiled on their own (devbin link tests, tests/test_link_amdgpu.py).
 *
 * heavy_fn keeps a 64-byte private array (volatile: it stays in scratch) and holds 48 loaded
 * values live at once, so it needs many VGPRs (on gfx90a clang-19 gives 64 VGPRs + 18 AGPRs
 * and a 68-byte frame).  unused_fn -> helper_fn (always a real call) is dead code for the
 * pruning tests.
 * one.cl includes this file with LINK_AMD_NOINLINE = noinline, to get LLVM's one-module totals.
 */
#ifndef LINK_AMD_NOINLINE
#define LINK_AMD_NOINLINE
#endif

LINK_AMD_NOINLINE float heavy_fn(global const float *in, int n)
{
    volatile float buf[16];
    float v[48];
    for (int i = 0; i < 48; i++)
        v[i] = in[i * 7 + n];
    for (int i = 0; i < 16; i++)
        buf[i] = v[i] * v[47 - i] + v[i + 16];
    float acc = 0.0f;
    for (int i = 0; i < 48; i++)
        acc += v[i] * v[(i * 5) % 48] + buf[(n + i) & 15];
    return acc;
}

__attribute__((noinline)) float helper_fn(float x)
{
    return x * 3.0f + 1.0f;
}

LINK_AMD_NOINLINE float unused_fn(float x)
{
    return helper_fn(x) - 2.0f;
}
