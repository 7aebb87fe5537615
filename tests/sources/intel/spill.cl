// Register pressure past 128 GRFs at SIMD8: IGC spills ("spilled around ..." in the build log) to scratch.
kernel void spill(global float16 *a, global const float16 *b) {
    size_t i = get_global_id(0);
    float16 v0 = b[i], v1 = b[i + 1], v2 = b[i + 2], v3 = b[i + 3], v4 = b[i + 4], v5 = b[i + 5];
    float16 v6 = b[i + 6], v7 = b[i + 7], v8 = b[i + 8], v9 = b[i + 9], v10 = b[i + 10], v11 = b[i + 11];
    float16 v12 = b[i + 12], v13 = b[i + 13], v14 = b[i + 14], v15 = b[i + 15];
#pragma unroll
    for (int r = 0; r < 16; r++) {
        v0 = v0 * v1 + v15; v1 = v1 * v2 + v0; v2 = v2 * v3 + v1; v3 = v3 * v4 + v2;
        v4 = v4 * v5 + v3; v5 = v5 * v6 + v4; v6 = v6 * v7 + v5; v7 = v7 * v8 + v6;
        v8 = v8 * v9 + v7; v9 = v9 * v10 + v8; v10 = v10 * v11 + v9; v11 = v11 * v12 + v10;
        v12 = v12 * v13 + v11; v13 = v13 * v14 + v12; v14 = v14 * v15 + v13; v15 = v15 * v0 + v14;
    }
    a[i] = v0 + v1 + v2 + v3 + v4 + v5 + v6 + v7 + v8 + v9 + v10 + v11 + v12 + v13 + v14 + v15;
    a[i + 1] = v0 * v1 * v2 * v3 * v4 * v5 * v6 * v7 * v8 * v9 * v10 * v11 * v12 * v13 * v14 * v15;
}
