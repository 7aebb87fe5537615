#include "vec.h"
float opt_hook(float x) { return x * 2.0f; }
