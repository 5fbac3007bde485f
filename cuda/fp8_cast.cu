// FP8 amax and casts (fp8_cast.hpp). The conversion is the hardware's cvt.rn.satfinite
// (__nv_cvt_float_to_fp8 with __NV_SATFINITE), whose bytes the host encoder of model/fp8.hpp
// reproduces; the scale is model::fp8_scale of the amax the device measured, computed by
// every thread from that one float (a few integer operations), so the casts need no
// separate scale kernel and nothing reads the amax on the host.
//
// amax is deterministic without a fixed reduction order: a maximum of integers (the
// magnitudes' bit patterns) is the same in any order, so each block folds its maximum into
// the result with one atomicMax.
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <stdexcept>

#include "cuda/check.hpp"
#include "cuda/fp8_cast.hpp"
#include "cuda/pack.cuh"

namespace holmes::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kPackBf16 = 8;  // bf16 values in 16 bytes

int grid_for(std::size_t items) {
  const std::size_t blocks = (items + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < 2048 ? (blocks ? blocks : 1) : 2048);
}

__device__ __forceinline__ std::size_t thread_index() { return blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; }
__device__ __forceinline__ std::size_t thread_count() { return std::size_t{gridDim.x} * blockDim.x; }

__device__ __forceinline__ __nv_fp8_interpretation_t kind_of(Fp8Format f) {
  return f == Fp8Format::kE4M3 ? __NV_E4M3 : __NV_E5M2;
}

__device__ __forceinline__ std::uint8_t encode(float x, float scale, __nv_fp8_interpretation_t kind) {
  return static_cast<std::uint8_t>(__nv_cvt_float_to_fp8(x * scale, __NV_SATFINITE, kind));
}

__device__ __forceinline__ float decode(std::uint8_t q, __nv_fp8_interpretation_t kind) {
  const __half_raw h = __nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(q), kind);
  return __half2float(__half(h));
}

// kW = 8: 16-byte packs (x aligned), then the n % 8 tail; kW = 1: element by element.
template <int kW>
__global__ void amax_kernel(unsigned int* amax_bits, const bf16* x, std::size_t n) {
  unsigned int best = 0;
  const std::size_t packs = n / kW;
  for (std::size_t q = thread_index(); q < packs; q += thread_count()) {
    float v[kW];
    load_vec<kW>(v, x + q * kW);
#pragma unroll
    for (int k = 0; k < kW; ++k) best = max(best, model::fp8_magnitude_bits(v[k]));
  }
  for (std::size_t i = packs * kW + thread_index(); i < n; i += thread_count())
    best = max(best, model::fp8_magnitude_bits(__bfloat162float(x[i])));
  best = __reduce_max_sync(0xffffffffu, best);
  __shared__ unsigned int warp_best[kThreads / 32];
  if (threadIdx.x % 32 == 0) warp_best[threadIdx.x / 32] = best;
  __syncthreads();
  if (threadIdx.x < 32) {
    best = threadIdx.x < kThreads / 32 ? warp_best[threadIdx.x] : 0u;
    best = __reduce_max_sync(0xffffffffu, best);
    if (threadIdx.x == 0) atomicMax(amax_bits, best);
  }
}

// Every thread derives the scale from the amax; block 0's first thread writes its inverse.
__device__ __forceinline__ float scale_from(const float* amax, float* scale_inv, Fp8Format f) {
  const float a = *amax;
  if (scale_inv != nullptr && blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0 && threadIdx.y == 0)
    *scale_inv = model::fp8_scale_inv(a, f);
  return model::fp8_scale(a, f);
}

// kW = 8: inp 16-byte and out 8-byte aligned, 8 codes stored as one 8-byte word.
template <int kW>
__global__ void cast_kernel(std::uint8_t* out, float* scale_inv, const bf16* inp, std::size_t n, const float* amax,
                            Fp8Format f) {
  const float scale = scale_from(amax, scale_inv, f);
  const __nv_fp8_interpretation_t kind = kind_of(f);
  const std::size_t packs = n / kW;
  for (std::size_t q = thread_index(); q < packs; q += thread_count()) {
    float v[kW];
    load_vec<kW>(v, inp + q * kW);
    if constexpr (kW == 1) {
      out[q] = encode(v[0], scale, kind);
    } else {
      uint2 word;
      std::uint8_t* b = reinterpret_cast<std::uint8_t*>(&word);
#pragma unroll
      for (int k = 0; k < kW; ++k) b[k] = encode(v[k], scale, kind);
      *reinterpret_cast<uint2*>(out + q * kW) = word;
    }
  }
  for (std::size_t i = packs * kW + thread_index(); i < n; i += thread_count())
    out[i] = encode(__bfloat162float(inp[i]), scale, kind);
}

constexpr int kTile = 32, kTileRows = 8;  // a 32 x 32 tile, 32 x 8 threads, 4 rows each

// Tile (blockIdx.x: 32 rows, blockIdx.y: 32 columns): cast with coalesced reads of inp and
// writes of out, keep the codes in shared memory, write out_t's 32 rows of the tile's
// columns from there.
__global__ void cast_transpose_kernel(std::uint8_t* out, std::uint8_t* out_t, float* scale_inv, const bf16* inp,
                                      int rows, int cols, const float* amax, Fp8Format f) {
  __shared__ std::uint8_t tile[kTile][kTile + 4];
  const float scale = scale_from(amax, scale_inv, f);
  const __nv_fp8_interpretation_t kind = kind_of(f);
  const int r0 = blockIdx.x * kTile, c0 = blockIdx.y * kTile;
  for (int i = threadIdx.y; i < kTile; i += kTileRows) {
    const int r = r0 + i, c = c0 + threadIdx.x;
    if (r < rows && c < cols) {
      const std::size_t at = static_cast<std::size_t>(r) * cols + c;
      const std::uint8_t q = encode(__bfloat162float(inp[at]), scale, kind);
      if (out != nullptr) out[at] = q;
      tile[i][threadIdx.x] = q;
    }
  }
  if (out_t == nullptr) return;
  __syncthreads();
  for (int i = threadIdx.y; i < kTile; i += kTileRows) {
    const int c = c0 + i, r = r0 + threadIdx.x;
    if (c < cols && r < rows) out_t[static_cast<std::size_t>(c) * rows + r] = tile[threadIdx.x][i];
  }
}

__global__ void cast_from_kernel(bf16* out, const std::uint8_t* inp, std::size_t n, const float* scale_inv,
                                 Fp8Format f) {
  const float s = *scale_inv;
  const __nv_fp8_interpretation_t kind = kind_of(f);
  for (std::size_t i = thread_index(); i < n; i += thread_count())
    out[i] = __float2bfloat16_rn(decode(inp[i], kind) * s);
}

bool aligned(const void* p, unsigned bytes) { return (reinterpret_cast<std::uintptr_t>(p) % bytes) == 0; }

}  // namespace

void amax_forward(float* amax, const bf16* x, std::size_t n, cudaStream_t stream) {
  static_assert(sizeof(float) == sizeof(unsigned int), "amax is folded as the float's bits");
  HOLMES_CUDA_CHECK(cudaMemsetAsync(amax, 0, sizeof(float), stream));
  if (n == 0) return;
  auto* bits = reinterpret_cast<unsigned int*>(amax);
  if (is_aligned16(x))
    amax_kernel<kPackBf16><<<grid_for(n / kPackBf16 + 1), kThreads, 0, stream>>>(bits, x, n);
  else
    amax_kernel<1><<<grid_for(n), kThreads, 0, stream>>>(bits, x, n);
  HOLMES_CUDA_CHECK(cudaGetLastError());
}

void cast_to_fp8(std::uint8_t* out, float* scale_inv, const bf16* inp, std::size_t n, const float* amax, Fp8Format f,
                 cudaStream_t stream) {
  if (n == 0 && scale_inv == nullptr) return;
  if (is_aligned16(inp) && aligned(out, 8))
    cast_kernel<kPackBf16><<<grid_for(n / kPackBf16 + 1), kThreads, 0, stream>>>(out, scale_inv, inp, n, amax, f);
  else
    cast_kernel<1><<<grid_for(n), kThreads, 0, stream>>>(out, scale_inv, inp, n, amax, f);
  HOLMES_CUDA_CHECK(cudaGetLastError());
}

void cast_transpose_to_fp8(std::uint8_t* out, std::uint8_t* out_t, float* scale_inv, const bf16* inp, int rows,
                           int cols, const float* amax, Fp8Format f, cudaStream_t stream) {
  if (rows < 0 || cols < 0 || (out == nullptr && out_t == nullptr))
    throw std::invalid_argument("cast_transpose_to_fp8: rows and cols >= 0 and at least one output");
  const long long col_tiles = (static_cast<long long>(cols) + kTile - 1) / kTile;
  if (col_tiles > 65535)
    throw std::invalid_argument("cast_transpose_to_fp8: cols > 65535 * 32 (the grid's y limit)");
  if (rows == 0 || cols == 0) {
    // Nothing to cast; the inverse scale is still written, as for a non-empty tensor.
    if (scale_inv != nullptr) cast_to_fp8(nullptr, scale_inv, inp, 0, amax, f, stream);
    return;
  }
  const dim3 grid(static_cast<unsigned>((rows + kTile - 1) / kTile), static_cast<unsigned>(col_tiles));
  cast_transpose_kernel<<<grid, dim3(kTile, kTileRows), 0, stream>>>(out, out_t, scale_inv, inp, rows, cols, amax, f);
  HOLMES_CUDA_CHECK(cudaGetLastError());
}

void cast_from_fp8(bf16* out, const std::uint8_t* inp, std::size_t n, const float* scale_inv, Fp8Format f,
                   cudaStream_t stream) {
  if (n == 0) return;
  cast_from_kernel<<<grid_for(n), kThreads, 0, stream>>>(out, inp, n, scale_inv, f);
  HOLMES_CUDA_CHECK(cudaGetLastError());
}

}  // namespace holmes::cuda
