int other(int x) { return x ^ 5; }
