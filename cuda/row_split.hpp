// How a row of n elements at address `addr` is read 16 bytes at a time (pack.cuh's row
// helpers): a scalar head up to the first 16-byte boundary, `packs` whole 16-byte packs, then
// a scalar tail. Plain arithmetic shared by device code and the host tests
// (parity_harness_test.cpp), hence host-and-device and no CUDA types.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define HOLMES_HOST_DEVICE __host__ __device__
#else
#define HOLMES_HOST_DEVICE
#endif

namespace holmes::cuda {

struct RowSplit {
  int head;   // elements [0, head) one by one
  int packs;  // then [head, head + packs * (16 / elem_bytes)) in packs; the rest one by one
};

// elem_bytes divides 16 and addr is a multiple of elem_bytes (any T* is).
HOLMES_HOST_DEVICE inline RowSplit split_row(std::uintptr_t addr, int n, int elem_bytes) {
  int head = int(((16u - (addr & 15u)) & 15u) / unsigned(elem_bytes));
  if (head > n) head = n;
  return {head, (n - head) / (16 / elem_bytes)};
}

// For out[i] = f(in[i]): packs only when out and in are equally misaligned (one split serves
// both); otherwise the whole row goes one by one.
HOLMES_HOST_DEVICE inline RowSplit split_row_pair(std::uintptr_t out, std::uintptr_t in, int n,
                                                  int elem_bytes) {
  if (((out ^ in) & 15u) != 0) return {n, 0};
  return split_row(in, n, elem_bytes);
}

}  // namespace holmes::cuda
