"""Our compiled CPU kernels: the C++ sources and the module that builds and loads them."""
