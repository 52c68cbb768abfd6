// Does not compile: the nvcc front end reports an undefined identifier.
__global__ void k(float* a) { a[0] = undefined_thing; }
