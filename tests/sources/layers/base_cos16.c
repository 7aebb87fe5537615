#include "vec.h"
/* The generic 16-wide version: two 8-wide calls. */
float16 cos16(float16 v) {
    float8 lo = cos8(v.lo), hi = cos8(v.hi);
    float16 r;
    r.lo = lo;
    r.hi = hi;
    return r;
}
