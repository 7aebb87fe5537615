#include "vec.h"
float4 poly(float4 x) { return vadd(vmul(x, x), x); }
