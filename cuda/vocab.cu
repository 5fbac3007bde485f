// The vocabulary-sharded ops: token embedding and cross-entropy (vocab.hpp). A token or
// target outside [vocab_begin, vocab_begin + Vl) belongs to another tensor-parallel shard.
// Columns with a global id >= V are padding and never count. fp32 and bf16 share one
// template per kernel; arithmetic is fp32, bf16 is rounded once on store.
//
// Embedding backward without atomics: the positions are sorted by (token, position) with
// CUB's radix sort, then the block at the first position of each token's run sums that
// token's dout rows in position order and adds the sum into dwte. Every sum has a fixed
// order, so runs repeat bit for bit; the work is O(N C + N log) for N = B*T, whatever V is.
//
// Cross-entropy: one block per row. The fused forward keeps a running max and a rescaled
// sum (online softmax) so each row is read once; the backward reads each logit once and
// writes its gradient over it when dlogits aliases logits.
#include <cub/device/device_radix_sort.cuh>

#include <cmath>

#include "cuda/check.hpp"
#include "cuda/pack.cuh"
#include "cuda/scratch.hpp"
#include "cuda/vocab.hpp"
#include "cuda/warp.cuh"

namespace holmes::cuda {

int embedding_sort_bits(int N, int Vl) {
  // Keys are row * N + position with row in [0, Vl]: all below (Vl + 1) * N.
  const unsigned long long limit = (static_cast<unsigned long long>(Vl) + 1) * N;
  int bits = 1;
  while (bits < 64 && (1ull << bits) < limit) ++bits;
  return bits;
}

namespace {

constexpr int kThreads = 256;  // cross-entropy: one block per row
constexpr int kWarps = kThreads / kWarpSize;
constexpr int kEmbedThreads = 128;

int blocks_for(long long n, int per_block) { return int((n + per_block - 1) / per_block); }

int valid_columns(int Vl, int vocab_begin, int V) {
  const int valid = V - vocab_begin;
  return valid < 0 ? 0 : (valid > Vl ? Vl : valid);
}

// ---- embedding ----

// One thread per kW channels of one position.
// pos (B,T) or null: the position row of token bt is pos[bt] (its place in its document), else bt % T.
template <class E, int kW>
__global__ void embedding_forward_kernel(E* out, const int* tokens, const int* pos, const E* wte, const E* wpe,
                                         int BT, int T, int C, int vocab_begin, int Vl) {
  const int chunks = C / kW;
  const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i >= (long long)BT * chunks) return;
  const int bt = int(i / chunks), c = int(i % chunks) * kW;
  const int local = tokens[bt] - vocab_begin;
  float e[kW], p[kW];
#pragma unroll
  for (int k = 0; k < kW; ++k) e[k] = p[k] = 0.0f;
  if (local >= 0 && local < Vl) load_vec<kW>(e, wte + (long long)local * C + c);
  if (wpe != nullptr) load_vec<kW>(p, wpe + (long long)(pos != nullptr ? pos[bt] : bt % T) * C + c);
#pragma unroll
  for (int k = 0; k < kW; ++k) e[k] += p[k];
  store_vec<kW>(out + (long long)bt * C + c, e);
}

// keys[p] = row * N + p, row = the token's local id, or Vl for a token of another shard.
// Keys are distinct, so the sorted order (by row, then position) does not depend on the
// sort being stable.
__global__ void embedding_keys_kernel(unsigned long long* keys, const int* tokens, int N,
                                      int vocab_begin, int Vl) {
  const int p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= N) return;
  const int local = tokens[p] - vocab_begin;
  const unsigned long long row = (local >= 0 && local < Vl) ? local : Vl;
  keys[p] = row * N + p;
}

// The sorted keys are cut into segments of kSegment positions; block s sums segment s. A run
// (the positions of one row) that lies wholly inside the segment is summed in position order
// and added into dwte. A run cut by the segment's start is stored (not added) in
// partial[2s]; otherwise a run cut by its end in partial[2s + 1]. embedding_wte_join_kernel
// then adds each cut run's pieces in segment order. So no row waits for one block to walk
// all its positions (a frequent token occurs thousands of times in a batch), and the sums
// are in a fixed order: repeated runs are bit-identical.
constexpr int kSegment = 32;

template <class E, int kW>
__global__ void embedding_wte_segment_kernel(float* dwte, float* partial, const E* dout,
                                             const unsigned long long* sorted, int N, int C,
                                             int Vl) {
  __shared__ unsigned long long rows[kSegment + 2];  // rows of positions begin-1 .. end
  __shared__ int pos[kSegment];
  const unsigned long long n = N;
  const int s = blockIdx.x, begin = s * kSegment, end = min(N, begin + kSegment);
  for (int k = threadIdx.x; k < end - begin + 2; k += blockDim.x) {
    const int i = begin - 1 + k;
    rows[k] = (i >= 0 && i < N) ? sorted[i] / n : ~0ull;  // ~0: no neighbour
    if (k >= 1 && i < end) pos[k - 1] = int(sorted[i] % n);
  }
  __syncthreads();
  const unsigned long long* row_at = rows + 1;  // row_at[k]: the row of position begin + k
  const int len = end - begin;
  const bool cut_front = row_at[-1] == row_at[0], cut_back = row_at[len] == row_at[len - 1];
  for (int c = threadIdx.x * kW; c < C; c += blockDim.x * kW) {
    for (int i = 0; i < len;) {
      const unsigned long long row = row_at[i];
      if (row >= (unsigned long long)Vl) break;  // tokens of other shards sort last
      float acc[kW];
#pragma unroll
      for (int k = 0; k < kW; ++k) acc[k] = 0.0f;
      int j = i;
      // When position j + 3 is still this row, so are j .. j + 3: four loads in flight,
      // added in position order.
      for (; j + 3 < len && row_at[j + 3] == row; j += 4) {
        float d[4][kW];
#pragma unroll
        for (int u = 0; u < 4; ++u) load_vec<kW>(d[u], dout + (long long)pos[j + u] * C + c);
#pragma unroll
        for (int u = 0; u < 4; ++u)
#pragma unroll
          for (int k = 0; k < kW; ++k) acc[k] += d[u][k];
      }
      for (; j < len && row_at[j] == row; ++j) {
        float d[kW];
        load_vec<kW>(d, dout + (long long)pos[j] * C + c);
#pragma unroll
        for (int k = 0; k < kW; ++k) acc[k] += d[k];
      }
      if ((i == 0 && cut_front) || (j == len && cut_back)) {
        float* p = partial + (std::size_t(2) * s + (i == 0 && cut_front ? 0 : 1)) * C + c;
#pragma unroll
        for (int k = 0; k < kW; ++k) p[k] = acc[k];
      } else {
        float* g = dwte + row * C + c;
#pragma unroll
        for (int k = 0; k < kW; ++k) g[k] += acc[k];
      }
      i = j;
    }
  }
}

// Block s: when a run starts in segment s and leaves through its end, adds its pieces (s's
// partial[2s + 1], then partial[2t] of each following segment t it reaches) in segment order
// into dwte.
__global__ void embedding_wte_join_kernel(float* dwte, const float* partial,
                                          const unsigned long long* sorted, int N, int C, int Vl) {
  const unsigned long long n = N;
  const int s = blockIdx.x, begin = s * kSegment, end = min(N, begin + kSegment);
  if (end >= N) return;
  const unsigned long long row = sorted[end - 1] / n;
  if (row >= (unsigned long long)Vl || sorted[end] / n != row) return;  // nothing leaves
  // A segment that is one run cut at its start: that run started earlier.
  if (begin > 0 && sorted[begin - 1] / n == row && sorted[begin] / n == row) return;
  int last = s + 1;  // the last segment the run reaches
  while ((last + 1) * kSegment < N && sorted[(last + 1) * kSegment] / n == row) ++last;
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    float acc = partial[(std::size_t(2) * s + 1) * C + c];
    for (int t = s + 1; t <= last; ++t) acc += partial[std::size_t(2) * t * C + c];
    dwte[row * C + c] += acc;
  }
}

// One thread per (t, c) sums over the batch in order: no collisions.
template <class E>
__global__ void embedding_wpe_kernel(float* dwpe, const E* dout, int B, int T, int C) {
  const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  const long long TC = (long long)T * C;
  if (i >= TC) return;
  float sum = 0.0f;
  for (int b = 0; b < B; ++b) sum += widen(dout[b * TC + i]);
  dwpe[i] += sum;
}

template <class E>
void embedding_forward_impl(E* out, const int* tokens, const int* pos, const E* wte, const E* wpe, int B, int T,
                            int C, int vocab_begin, int Vl, cudaStream_t stream) {
  const long long n = (long long)B * T * C;
  if (n <= 0) return;
  constexpr int kW = kPack<E>;
  const bool packed = C % kW == 0 && is_aligned16(out) && is_aligned16(wte) &&
                      (wpe == nullptr || is_aligned16(wpe));
  if (packed) {
    embedding_forward_kernel<E, kW><<<blocks_for(n / kW, kThreads), kThreads, 0, stream>>>(
        out, tokens, pos, wte, wpe, B * T, T, C, vocab_begin, Vl);
  } else {
    embedding_forward_kernel<E, 1><<<blocks_for(n, kThreads), kThreads, 0, stream>>>(
        out, tokens, pos, wte, wpe, B * T, T, C, vocab_begin, Vl);
  }
  HOLMES_CUDA_CHECK(cudaGetLastError());
}

template <class E>
void embedding_wte_backward(float* dwte, const E* dout, const int* tokens, int N, int C,
                            int vocab_begin, int Vl, cudaStream_t stream) {
  using Key = unsigned long long;
  const int bits = embedding_sort_bits(N, Vl);
  size_t sort_bytes = 0;
  HOLMES_CUDA_CHECK(cub::DeviceRadixSort::SortKeys(nullptr, sort_bytes, (const Key*)nullptr,
                                                   (Key*)nullptr, N, 0, bits, stream));
  const int segments = (N + kSegment - 1) / kSegment;
  ScratchLayout layout;
  const size_t keys_at = layout.add(sizeof(Key) * N), sorted_at = layout.add(sizeof(Key) * N);
  const size_t sort_at = layout.add(sort_bytes);
  const size_t partial_at = layout.add(sizeof(float) * 2 * std::size_t(segments) * C);
  StreamScratch scratch(layout.bytes(), stream);
  Key* keys = scratch.at<Key>(keys_at);
  Key* sorted = scratch.at<Key>(sorted_at);
  embedding_keys_kernel<<<blocks_for(N, kThreads), kThreads, 0, stream>>>(keys, tokens, N,
                                                                          vocab_begin, Vl);
  HOLMES_CUDA_CHECK(cudaGetLastError());
  HOLMES_CUDA_CHECK(cub::DeviceRadixSort::SortKeys(scratch.at<void>(sort_at), sort_bytes, keys,
                                                   sorted, N, 0, bits, stream));
  constexpr int kW = kPack<E>;
  float* partial = scratch.at<float>(partial_at);
  if (C % kW == 0 && is_aligned16(dout)) {
    embedding_wte_segment_kernel<E, kW>
        <<<segments, kEmbedThreads, 0, stream>>>(dwte, partial, dout, sorted, N, C, Vl);
  } else {
    embedding_wte_segment_kernel<E, 1>
        <<<segments, kEmbedThreads, 0, stream>>>(dwte, partial, dout, sorted, N, C, Vl);
  }
  HOLMES_CUDA_CHECK(cudaGetLastError());
  embedding_wte_join_kernel<<<segments, kEmbedThreads, 0, stream>>>(dwte, partial, sorted, N, C, Vl);
  HOLMES_CUDA_CHECK(cudaGetLastError());
  scratch.release();
}

template <class E>
void embedding_backward_impl(float* dwte, float* dwpe, const E* dout, const int* tokens, const int* pos, int B,
                             int T, int C, int vocab_begin, int Vl, cudaStream_t stream) {
  const int N = B * T;
  if (N <= 0 || C <= 0) return;
  if (Vl > 0) embedding_wte_backward(dwte, dout, tokens, N, C, vocab_begin, Vl, stream);
  if (dwpe == nullptr) return;
  // Document positions repeat across the batch like tokens: the rows of dwpe are summed as
  // wte's, keyed by position (< T), in a fixed order.
  if (pos != nullptr) return embedding_wte_backward(dwpe, dout, pos, N, C, 0, T, stream);
  embedding_wpe_kernel<<<blocks_for((long long)T * C, kThreads), kThreads, 0, stream>>>(
      dwpe, dout, B, T, C);
  HOLMES_CUDA_CHECK(cudaGetLastError());
}

// ---- cross-entropy ----

// Reductions over a kThreads block, the result in every thread. `shared` holds kWarps
// values; the leading barrier lets a kernel reduce twice with the same array.
__device__ float block_max(float v, float* shared) {
  v = warp_max(v);
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  return warp_max(lane < kWarps ? shared[lane] : -INFINITY);
}

__device__ float block_sum(float v, float* shared) {
  v = warp_sum(v);
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  return warp_sum(lane < kWarps ? shared[lane] : 0.0f);
}

// Online softmax state: running max m and sum s of exp(x - m). (-inf, 0) is empty. (No
// member initializers: the type also lives in __shared__ memory.)
struct MaxSum {
  float m, s;
};
__device__ __forceinline__ MaxSum empty_max_sum() { return {-INFINITY, 0.0f}; }

__device__ __forceinline__ float rescale(float m, float to) {
  return m == -INFINITY ? 0.0f : expf(m - to);
}

__device__ __forceinline__ MaxSum combine(MaxSum a, MaxSum b) {
  const float m = fmaxf(a.m, b.m);
  return {m, a.s * rescale(a.m, m) + b.s * rescale(b.m, m)};
}

__device__ MaxSum block_combine(MaxSum v, MaxSum* shared) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
    v = combine(v, {__shfl_xor_sync(0xffffffffu, v.m, offset),
                    __shfl_xor_sync(0xffffffffu, v.s, offset)});
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = lane < kWarps ? shared[lane] : empty_max_sum();
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
    v = combine(v, {__shfl_xor_sync(0xffffffffu, v.m, offset),
                    __shfl_xor_sync(0xffffffffu, v.s, offset)});
  return v;
}

// The target's logit if this shard holds it (local id in [0, valid)), else 0.
template <class E>
__device__ float target_logit(const E* row, int target, int vocab_begin, int valid) {
  const int local = target - vocab_begin;
  return (local >= 0 && local < valid) ? widen(row[local]) : 0.0f;
}

template <class E>
__global__ void ce_max_kernel(float* row_max, const E* logits, int Vl, int valid) {
  __shared__ float shared[kWarps];
  const E* row = logits + (long long)blockIdx.x * Vl;
  float mx = -INFINITY;
  for_each_in_row(row, valid, threadIdx.x, blockDim.x, [&](int, float x) { mx = fmaxf(mx, x); });
  mx = block_max(mx, shared);
  if (threadIdx.x == 0) row_max[blockIdx.x] = mx;
}

template <class E>
__global__ void ce_stats_kernel(float* stats, const E* logits, const float* row_max,
                                const int* targets, int Vl, int vocab_begin, int valid) {
  __shared__ float shared[kWarps];
  const int n = blockIdx.x;
  const E* row = logits + (long long)n * Vl;
  const float mx = row_max[n];
  float sum = 0.0f;
  for_each_in_row(row, valid, threadIdx.x, blockDim.x, [&](int, float x) { sum += expf(x - mx); });
  sum = block_sum(sum, shared);
  if (threadIdx.x == 0) {
    stats[2 * n] = sum;
    stats[2 * n + 1] = target_logit(row, targets[n], vocab_begin, valid);
  }
}

template <class E>
__global__ void ce_fused_kernel(float* row_max, float* stats, const E* logits, const int* targets,
                                int Vl, int vocab_begin, int valid) {
  __shared__ MaxSum shared[kWarps];
  const int n = blockIdx.x;
  const E* row = logits + (long long)n * Vl;
  MaxSum acc = empty_max_sum();
  // A pack's max first, then its exponentials independently of each other (one rescale per
  // pack, not a dependent chain per element).
  auto pack = [&](const auto& x) {
    constexpr int kW = sizeof(x) / sizeof(float);
    float m = x[0];
#pragma unroll
    for (int k = 1; k < kW; ++k) m = fmaxf(m, x[k]);
    if (m > acc.m) {
      acc.s *= rescale(acc.m, m);
      acc.m = m;
    }
    if (acc.m == -INFINITY) return;  // every value so far is -inf: nothing to add
    float t = 0.0f;
#pragma unroll
    for (int k = 0; k < kW; ++k) t += expf(x[k] - acc.m);
    acc.s += t;
  };
  auto one = [&](float x) {
    if (x > acc.m) {
      acc.s = acc.s * rescale(acc.m, x) + 1.0f;
      acc.m = x;
    } else if (acc.m != -INFINITY) {
      acc.s += expf(x - acc.m);
    }
  };
  for_each_pack_in_row(row, valid, threadIdx.x, blockDim.x, pack, one);
  acc = block_combine(acc, shared);
  if (threadIdx.x == 0) {
    row_max[n] = acc.m;
    stats[2 * n] = acc.s;
    stats[2 * n + 1] = target_logit(row, targets[n], vocab_begin, valid);
  }
}

__global__ void ce_loss_kernel(float* losses, const float* stats, const float* row_max, int N) {
  const int n = blockIdx.x * blockDim.x + threadIdx.x;
  if (n < N) losses[n] = logf(stats[2 * n]) + row_max[n] - stats[2 * n + 1];
}

// One block per row: every logit read once, its gradient written in its place.
template <class E>
__global__ void ce_backward_kernel(E* dlogits, const E* logits, const float* row_max,
                                   const float* stats, const int* targets, float dloss, int Vl,
                                   int vocab_begin, int valid) {
  const int n = blockIdx.x;
  const float mx = row_max[n], scale = dloss / stats[2 * n];
  const int target = targets[n] - vocab_begin;
  const long long offset = (long long)n * Vl;
  transform_row(dlogits + offset, logits + offset, Vl, threadIdx.x, blockDim.x,
                [&](int v, float x) {
                  if (v >= valid) return 0.0f;
                  const float d = expf(x - mx) * scale;
                  return v == target ? d - dloss : d;
                });
}

template <class E>
void ce_max_impl(float* row_max, const E* logits, int N, int Vl, int vocab_begin, int V,
                 cudaStream_t stream) {
  if (N <= 0) return;
  ce_max_kernel<<<N, kThreads, 0, stream>>>(row_max, logits, Vl,
                                            valid_columns(Vl, vocab_begin, V));
  HOLMES_CUDA_CHECK(cudaGetLastError());
}

template <class E>
void ce_stats_impl(float* stats, const E* logits, const float* row_max, const int* targets, int N,
                   int Vl, int vocab_begin, int V, cudaStream_t stream) {
  if (N <= 0) return;
  ce_stats_kernel<<<N, kThreads, 0, stream>>>(stats, logits, row_max, targets, Vl, vocab_begin,
                                              valid_columns(Vl, vocab_begin, V));
  HOLMES_CUDA_CHECK(cudaGetLastError());
}

template <class E>
void ce_fused_impl(float* row_max, float* stats, const E* logits, const int* targets, int N,
                   int Vl, int vocab_begin, int V, cudaStream_t stream) {
  if (N <= 0) return;
  ce_fused_kernel<<<N, kThreads, 0, stream>>>(row_max, stats, logits, targets, Vl, vocab_begin,
                                              valid_columns(Vl, vocab_begin, V));
  HOLMES_CUDA_CHECK(cudaGetLastError());
}

template <class E>
void ce_backward_impl(E* dlogits, const E* logits, const float* row_max, const float* stats,
                      const int* targets, float dloss, int N, int Vl, int vocab_begin, int V,
                      cudaStream_t stream) {
  if (N <= 0 || Vl <= 0) return;
  ce_backward_kernel<<<N, kThreads, 0, stream>>>(dlogits, logits, row_max, stats, targets, dloss,
                                                 Vl, vocab_begin,
                                                 valid_columns(Vl, vocab_begin, V));
  HOLMES_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void embedding_forward(float* out, const int* tokens, const float* wte, const float* wpe, int B,
                       int T, int C, int vocab_begin, int Vl, cudaStream_t stream) {
  embedding_forward_impl(out, tokens, nullptr, wte, wpe, B, T, C, vocab_begin, Vl, stream);
}
void embedding_forward(bf16* out, const int* tokens, const bf16* wte, const bf16* wpe, int B,
                       int T, int C, int vocab_begin, int Vl, cudaStream_t stream) {
  embedding_forward_impl(out, tokens, nullptr, wte, wpe, B, T, C, vocab_begin, Vl, stream);
}
void embedding_forward(float* out, const int* tokens, const int* pos, const float* wte, const float* wpe, int B,
                       int T, int C, int vocab_begin, int Vl, cudaStream_t stream) {
  embedding_forward_impl(out, tokens, pos, wte, wpe, B, T, C, vocab_begin, Vl, stream);
}
void embedding_forward(bf16* out, const int* tokens, const int* pos, const bf16* wte, const bf16* wpe, int B,
                       int T, int C, int vocab_begin, int Vl, cudaStream_t stream) {
  embedding_forward_impl(out, tokens, pos, wte, wpe, B, T, C, vocab_begin, Vl, stream);
}

void embedding_backward(float* dwte, float* dwpe, const float* dout, const int* tokens, int B,
                        int T, int C, int vocab_begin, int Vl, cudaStream_t stream) {
  embedding_backward_impl(dwte, dwpe, dout, tokens, nullptr, B, T, C, vocab_begin, Vl, stream);
}
void embedding_backward(float* dwte, float* dwpe, const bf16* dout, const int* tokens, int B,
                        int T, int C, int vocab_begin, int Vl, cudaStream_t stream) {
  embedding_backward_impl(dwte, dwpe, dout, tokens, nullptr, B, T, C, vocab_begin, Vl, stream);
}
void embedding_backward(float* dwte, float* dwpe, const float* dout, const int* tokens, const int* pos, int B,
                        int T, int C, int vocab_begin, int Vl, cudaStream_t stream) {
  embedding_backward_impl(dwte, dwpe, dout, tokens, pos, B, T, C, vocab_begin, Vl, stream);
}
void embedding_backward(float* dwte, float* dwpe, const bf16* dout, const int* tokens, const int* pos, int B,
                        int T, int C, int vocab_begin, int Vl, cudaStream_t stream) {
  embedding_backward_impl(dwte, dwpe, dout, tokens, pos, B, T, C, vocab_begin, Vl, stream);
}

void crossentropy_max_forward(float* row_max, const float* logits, int N, int Vl, int vocab_begin,
                              int V, cudaStream_t stream) {
  ce_max_impl(row_max, logits, N, Vl, vocab_begin, V, stream);
}
void crossentropy_max_forward(float* row_max, const bf16* logits, int N, int Vl, int vocab_begin,
                              int V, cudaStream_t stream) {
  ce_max_impl(row_max, logits, N, Vl, vocab_begin, V, stream);
}

void crossentropy_stats_forward(float* stats, const float* logits, const float* row_max,
                                const int* targets, int N, int Vl, int vocab_begin, int V,
                                cudaStream_t stream) {
  ce_stats_impl(stats, logits, row_max, targets, N, Vl, vocab_begin, V, stream);
}
void crossentropy_stats_forward(float* stats, const bf16* logits, const float* row_max,
                                const int* targets, int N, int Vl, int vocab_begin, int V,
                                cudaStream_t stream) {
  ce_stats_impl(stats, logits, row_max, targets, N, Vl, vocab_begin, V, stream);
}

void crossentropy_fused_forward(float* row_max, float* stats, const float* logits,
                                const int* targets, int N, int Vl, int vocab_begin, int V,
                                cudaStream_t stream) {
  ce_fused_impl(row_max, stats, logits, targets, N, Vl, vocab_begin, V, stream);
}
void crossentropy_fused_forward(float* row_max, float* stats, const bf16* logits,
                                const int* targets, int N, int Vl, int vocab_begin, int V,
                                cudaStream_t stream) {
  ce_fused_impl(row_max, stats, logits, targets, N, Vl, vocab_begin, V, stream);
}

void crossentropy_forward(float* losses, const float* stats, const float* row_max, int N,
                          cudaStream_t stream) {
  if (N <= 0) return;
  ce_loss_kernel<<<blocks_for(N, kThreads), kThreads, 0, stream>>>(losses, stats, row_max, N);
  HOLMES_CUDA_CHECK(cudaGetLastError());
}

void crossentropy_backward(float* dlogits, const float* logits, const float* row_max,
                           const float* stats, const int* targets, float dloss, int N, int Vl,
                           int vocab_begin, int V, cudaStream_t stream) {
  ce_backward_impl(dlogits, logits, row_max, stats, targets, dloss, N, Vl, vocab_begin, V, stream);
}
void crossentropy_backward(bf16* dlogits, const bf16* logits, const float* row_max,
                           const float* stats, const int* targets, float dloss, int N, int Vl,
                           int vocab_begin, int V, cudaStream_t stream) {
  ce_backward_impl(dlogits, logits, row_max, stats, targets, dloss, N, Vl, vocab_begin, V, stream);
}

}  // namespace holmes::cuda
