#include "vec.h"
__attribute__((weak)) float opt_hook(float x);

float16 apply(float16 v, float4 a, float4 b, float *out) {
    float4 s = poly(vadd(a, b));
    if (opt_hook)
        s.x = opt_hook(s.x);
    *out = s.x + s.y;
    return cos16(v);
}
