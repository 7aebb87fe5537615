int helper_b(int x) { return x * 3; }
