// Roots for the link tests: k_main needs used_a (lib1) and weak_fn; k_other needs other.
int used_a(int x);
int weak_fn(int x);
int other(int x);
extern int counter;

__kernel void k_main(__global int *p) { p[0] = used_a(p[1]) + weak_fn(p[2]) + counter; }
__kernel void k_other(__global int *p) { p[0] = other(p[1]); }
