// The vocabulary-sharded ops: token embedding and cross-entropy (vocab.hpp). A token or
// target outside [vocab_begin, vocab_begin + Vl) belongs to another tensor-parallel shard.
// Columns with a global id >= V are padding and never count.
#include <cmath>

#include "cuda/check.hpp"
#include "cuda/vocab.hpp"
#include "cuda/warp.cuh"

namespace holmes::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kRowsPerBlock = kThreads / kWarpSize;  // one warp per row

int blocks_for(long long n, int per_block) { return int((n + per_block - 1) / per_block); }
__host__ __device__ int valid_columns(int Vl, int vocab_begin, int V) {
  int valid = V - vocab_begin;
  return valid < 0 ? 0 : (valid > Vl ? Vl : valid);
}

// One thread per (bt, c).
__global__ void embedding_forward_kernel(float* out, const int* tokens, const float* wte,
                                         const float* wpe, int BT, int T, int C, int vocab_begin,
                                         int Vl) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i >= (long long)BT * C) return;
  int bt = int(i / C), c = int(i % C);
  int local = tokens[bt] - vocab_begin;
  float e = (local >= 0 && local < Vl) ? wte[(long long)local * C + c] : 0.0f;
  float p = wpe ? wpe[(long long)(bt % T) * C + c] : 0.0f;
  out[i] = e + p;
}

// dwte: one thread per (bt, c); tokens repeat, so rows collide and need atomics.
__global__ void embedding_backward_wte_kernel(float* dwte, const float* dout, const int* tokens,
                                              int BT, int C, int vocab_begin, int Vl) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i >= (long long)BT * C) return;
  int bt = int(i / C), c = int(i % C);
  int local = tokens[bt] - vocab_begin;
  if (local >= 0 && local < Vl) atomicAdd(&dwte[(long long)local * C + c], dout[i]);
}

// dwpe: one thread per (t, c) sums over the batch, no collisions.
__global__ void embedding_backward_wpe_kernel(float* dwpe, const float* dout, int B, int T, int C) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i >= (long long)T * C) return;
  float sum = 0.0f;
  for (int b = 0; b < B; ++b) sum += dout[(long long)b * T * C + i];
  dwpe[i] += sum;
}

__global__ void ce_max_kernel(float* row_max, const float* logits, int N, int Vl, int valid) {
  int row = blockIdx.x * kRowsPerBlock + threadIdx.x / kWarpSize;
  int lane = threadIdx.x % kWarpSize;
  if (row >= N) return;
  const float* l = logits + (long long)row * Vl;
  float mx = -INFINITY;
  for (int v = lane; v < valid; v += kWarpSize) mx = fmaxf(mx, l[v]);
  mx = warp_max(mx);
  if (lane == 0) row_max[row] = mx;
}

__global__ void ce_stats_kernel(float* stats, const float* logits, const float* row_max,
                                const int* targets, int N, int Vl, int vocab_begin, int valid) {
  int row = blockIdx.x * kRowsPerBlock + threadIdx.x / kWarpSize;
  int lane = threadIdx.x % kWarpSize;
  if (row >= N) return;
  const float* l = logits + (long long)row * Vl;
  const float mx = row_max[row];
  float sum = 0.0f;
  for (int v = lane; v < valid; v += kWarpSize) sum += expf(l[v] - mx);
  sum = warp_sum(sum);
  if (lane == 0) {
    int local = targets[row] - vocab_begin;
    stats[2 * row] = sum;
    stats[2 * row + 1] = (local >= 0 && local < valid) ? l[local] : 0.0f;
  }
}

__global__ void ce_loss_kernel(float* losses, const float* stats, const float* row_max, int N) {
  int n = blockIdx.x * blockDim.x + threadIdx.x;
  if (n < N) losses[n] = logf(stats[2 * n]) + row_max[n] - stats[2 * n + 1];
}

// One thread per (n, v): reads its logit, writes its gradient (in place is safe).
__global__ void ce_backward_kernel(float* dlogits, const float* logits, const float* row_max,
                                   const float* stats, const int* targets, float dloss, int N,
                                   int Vl, int vocab_begin, int valid) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i >= (long long)N * Vl) return;
  int n = int(i / Vl), v = int(i % Vl);
  if (v >= valid) {
    dlogits[i] = 0.0f;
    return;
  }
  float d = expf(logits[i] - row_max[n]) * (dloss / stats[2 * n]);
  if (v == targets[n] - vocab_begin) d -= dloss;
  dlogits[i] = d;
}

}  // namespace

void embedding_forward(float* out, const int* tokens, const float* wte, const float* wpe, int B,
                       int T, int C, int vocab_begin, int Vl, cudaStream_t stream) {
  long long n = (long long)B * T * C;
  if (n <= 0) return;
  embedding_forward_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(
      out, tokens, wte, wpe, B * T, T, C, vocab_begin, Vl);
  HOLMES_CUDA_CHECK(cudaGetLastError());
}

void embedding_backward(float* dwte, float* dwpe, const float* dout, const int* tokens, int B,
                        int T, int C, int vocab_begin, int Vl, cudaStream_t stream) {
  long long n = (long long)B * T * C;
  if (n <= 0) return;
  embedding_backward_wte_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(
      dwte, dout, tokens, B * T, C, vocab_begin, Vl);
  HOLMES_CUDA_CHECK(cudaGetLastError());
  if (!dwpe) return;
  embedding_backward_wpe_kernel<<<blocks_for((long long)T * C, kThreads), kThreads, 0, stream>>>(
      dwpe, dout, B, T, C);
  HOLMES_CUDA_CHECK(cudaGetLastError());
}

void crossentropy_max_forward(float* row_max, const float* logits, int N, int Vl, int vocab_begin,
                              int V, cudaStream_t stream) {
  if (N <= 0) return;
  ce_max_kernel<<<blocks_for(N, kRowsPerBlock), kThreads, 0, stream>>>(
      row_max, logits, N, Vl, valid_columns(Vl, vocab_begin, V));
  HOLMES_CUDA_CHECK(cudaGetLastError());
}

void crossentropy_stats_forward(float* stats, const float* logits, const float* row_max,
                                const int* targets, int N, int Vl, int vocab_begin, int V,
                                cudaStream_t stream) {
  if (N <= 0) return;
  ce_stats_kernel<<<blocks_for(N, kRowsPerBlock), kThreads, 0, stream>>>(
      stats, logits, row_max, targets, N, Vl, vocab_begin, valid_columns(Vl, vocab_begin, V));
  HOLMES_CUDA_CHECK(cudaGetLastError());
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
  long long n = (long long)N * Vl;
  if (n <= 0) return;
  ce_backward_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(
      dlogits, logits, row_max, stats, targets, dloss, N, Vl, vocab_begin,
      valid_columns(Vl, vocab_begin, V));
  HOLMES_CUDA_CHECK(cudaGetLastError());
}

}  // namespace holmes::cuda
