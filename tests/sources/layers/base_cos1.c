#include "vec.h"
float cos1(float x) { return 1.0f - 0.5f * x * x; }
