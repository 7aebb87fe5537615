#include "vec.h"
/* The GPU-specific scalar: what the whole chain bottoms out in. */
float cos1(float x) { return 1.0f - 0.5f * x * x + 0.0416666f * x * x * x * x; }
