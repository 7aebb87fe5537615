#include "vec.h"
float4 vmul(float4 a, float4 b) { return a * b + 0.0f; }
