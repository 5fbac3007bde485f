// Device helpers for fp32 / bf16 kernels that read and write 16 bytes at a time (vocab.cu,
// layernorm.cu, optimizer.cu; pointwise.cu uses widen/narrow). Values are widened to fp32 on load and rounded once (to
// nearest even) on store. A "pack" of kW elements is 16 bytes (kW = 4 floats or 8 bf16) and
// must be 16-byte aligned; kW = 1 is the scalar path for sizes or pointers that are not.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "cuda/row_split.hpp"

namespace holmes::cuda {

__device__ __forceinline__ float widen(float x) { return x; }
__device__ __forceinline__ float widen(__nv_bfloat16 x) { return __bfloat162float(x); }

template <class T>
__device__ __forceinline__ T narrow(float x);
template <>
__device__ __forceinline__ float narrow<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __nv_bfloat16 narrow<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

// Host side: may this pointer be read in 16-byte packs?
inline bool is_aligned16(const void* p) { return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0; }

// Elements of T in one 16-byte pack.
template <class T>
constexpr int kPack = 16 / int(sizeof(T));

// x[0..kW) = p[0..kW) widened; p 16-byte aligned when kW > 1.
template <int kW, class T>
__device__ __forceinline__ void load_vec(float (&x)[kW], const T* p) {
  static_assert(kW == 1 || kW == kPack<T>, "a vector is one element or one 16-byte pack");
  if constexpr (kW == 1) {
    x[0] = widen(p[0]);
  } else {
    const int4 raw = *reinterpret_cast<const int4*>(p);
    const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
    for (int k = 0; k < kW; ++k) x[k] = widen(e[k]);
  }
}

// p[0..kW) = x[0..kW) rounded to T; p 16-byte aligned when kW > 1.
template <int kW, class T>
__device__ __forceinline__ void store_vec(T* p, const float (&x)[kW]) {
  static_assert(kW == 1 || kW == kPack<T>, "a vector is one element or one 16-byte pack");
  if constexpr (kW == 1) {
    p[0] = narrow<T>(x[0]);
  } else {
    int4 raw;
    T* e = reinterpret_cast<T*>(&raw);
#pragma unroll
    for (int k = 0; k < kW; ++k) e[k] = narrow<T>(x[k]);
    *reinterpret_cast<int4*>(p) = raw;
  }
}

// f(i, row[i]) for every i in [0, n) this thread (tid of nthreads) owns: a scalar head up to
// the first 16-byte boundary, 16-byte packs through the middle, a scalar tail. Which thread
// sees which element depends only on n and the row's address modulo 16, so sums stay
// reproducible.
template <class T, class F>
__device__ __forceinline__ void for_each_in_row(const T* row, int n, int tid, int nthreads, F f) {
  constexpr int kW = kPack<T>;
  const auto [head, packs] = split_row(reinterpret_cast<std::uintptr_t>(row), n, sizeof(T));
  for (int i = tid; i < head; i += nthreads) f(i, widen(row[i]));
  for (int q = tid; q < packs; q += nthreads) {
    float x[kW];
    load_vec<kW>(x, row + head + q * kW);
#pragma unroll
    for (int k = 0; k < kW; ++k) f(head + q * kW + k, x[k]);
  }
  for (int i = head + packs * kW + tid; i < n; i += nthreads) f(i, widen(row[i]));
}

// As for_each_in_row, but the aligned middle comes to `pack` a whole pack at a time
// (float (&x)[kW]), so a caller can work on its kW values independently; head and tail
// elements go to `one` (float).
template <class T, class P, class F>
__device__ __forceinline__ void for_each_pack_in_row(const T* row, int n, int tid, int nthreads,
                                                     P pack, F one) {
  constexpr int kW = kPack<T>;
  const auto [head, packs] = split_row(reinterpret_cast<std::uintptr_t>(row), n, sizeof(T));
  for (int i = tid; i < head; i += nthreads) one(widen(row[i]));
  for (int q = tid; q < packs; q += nthreads) {
    float x[kW];
    load_vec<kW>(x, row + head + q * kW);
    pack(x);
  }
  for (int i = head + packs * kW + tid; i < n; i += nthreads) one(widen(row[i]));
}

// out[i] = f(i, in[i]) for i in [0, n) this thread owns; out may alias in (each element is
// read before it is written, by the same thread). Packs only where out and in are equally
// misaligned; otherwise every element goes the scalar way.
template <class T, class F>
__device__ __forceinline__ void transform_row(T* out, const T* in, int n, int tid, int nthreads,
                                              F f) {
  constexpr int kW = kPack<T>;
  const auto [head, packs] = split_row_pair(reinterpret_cast<std::uintptr_t>(out),
                                            reinterpret_cast<std::uintptr_t>(in), n, sizeof(T));
  for (int i = tid; i < head; i += nthreads) out[i] = narrow<T>(f(i, widen(in[i])));
  for (int q = tid; q < packs; q += nthreads) {
    const int i0 = head + q * kW;
    float x[kW];
    load_vec<kW>(x, in + i0);
#pragma unroll
    for (int k = 0; k < kW; ++k) x[k] = f(i0 + k, x[k]);
    store_vec<kW>(out + i0, x);
  }
  for (int i = head + packs * kW + tid; i < n; i += nthreads) out[i] = narrow<T>(f(i, widen(in[i])));
}

}  // namespace holmes::cuda
