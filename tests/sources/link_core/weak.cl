__attribute__((weak)) int weak_fn(int x) { return x + 10; }
