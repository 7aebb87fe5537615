int helper_b(int x);
int used_a(int x) { return helper_b(x) + 1; }
