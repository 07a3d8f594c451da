// Internal: RLX_HOST_DEVICE marks a small inline function that both host code and CUDA
// device code call (__host__ __device__ under nvcc, nothing under a host compiler), so a
// piece of arithmetic the CPU and the CUDA backend share is written once.
#pragma once

#ifdef __CUDACC__
#define RLX_HOST_DEVICE __host__ __device__
#else
#define RLX_HOST_DEVICE
#endif
