int weak_fn(int x) { return x + 20; }
