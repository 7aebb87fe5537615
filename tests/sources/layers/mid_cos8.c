#include "vec.h"
/* The family's 8-wide version: eight calls of the scalar. */
float8 cos8(float8 v) {
    float8 r;
    for (int i = 0; i < 8; ++i) r[i] = cos1(v[i]);
    return r;
}
