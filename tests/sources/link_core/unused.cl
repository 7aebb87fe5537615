int never(int x) { return x - 1; }
