#include "vec.h"
float4 vadd(float4 a, float4 b) { return a + b; }
float4 vmul(float4 a, float4 b) { return a * b; }
