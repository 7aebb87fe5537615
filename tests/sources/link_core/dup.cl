int used_a(int x) { return x * 7; }
