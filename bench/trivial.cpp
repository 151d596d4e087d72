// The baseline process for cli.* benchmarks: a C++ program that does nothing.
int main() { return 0; }
