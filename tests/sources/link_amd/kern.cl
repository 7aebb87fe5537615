/* Kernels calling a device function defined in another object (lib.cl). */
float heavy_fn(global const float *in, int n);

kernel void kern_main(global const float *in, global float *out, int n)
{
    out[n] = heavy_fn(in, n) + 1.0f;
}

kernel void kern_light(global float *out)
{
    out[0] = 2.0f;
}
