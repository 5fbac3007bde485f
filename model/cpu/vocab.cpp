// The vocabulary-sharded ops: embedding lookup and the vocabulary-parallel cross-entropy
// (cuda/vocab.cu is the GPU twin).
#include <algorithm>
#include <cmath>

#include "model/cpu/cpu_ops.hpp"
#include "model/cpu/fast_math.hpp"

namespace holmes::model::cpu {

void embedding_forward(float* out, const int* tokens, const float* wte, const float* wpe, int B,
                       int T, int C, int vocab_begin, int Vl, const int* pos) {
#pragma omp parallel for schedule(static)
  for (int bt = 0; bt < B * T; ++bt) {
    float* o = out + static_cast<size_t>(bt) * C;
    const int local = tokens[bt] - vocab_begin;
    const float* e = (local >= 0 && local < Vl) ? wte + static_cast<size_t>(local) * C : nullptr;
    const int t = pos != nullptr ? pos[bt] : bt % T;
    const float* p = wpe != nullptr ? wpe + static_cast<size_t>(t) * C : nullptr;
#pragma omp simd
    for (int c = 0; c < C; ++c) o[c] = (e ? e[c] : 0.0f) + (p ? p[c] : 0.0f);
  }
}

void embedding_backward(float* dwte, float* dwpe, const float* dout, const int* tokens, int B,
                        int T, int C, int vocab_begin, int Vl, const int* pos) {
  // Tokens repeat, so rows of dwte collide; split the channels between threads instead.
  constexpr int kBlock = 64;
  const int blocks = (C + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static)
  for (int blk = 0; blk < blocks; ++blk) {
    const int c0 = blk * kBlock, c1 = std::min(C, c0 + kBlock);
    for (int bt = 0; bt < B * T; ++bt) {
      const float* d = dout + static_cast<size_t>(bt) * C;
      const int local = tokens[bt] - vocab_begin;
      if (local >= 0 && local < Vl) {
        float* g = dwte + static_cast<size_t>(local) * C;
        for (int c = c0; c < c1; ++c) g[c] += d[c];
      }
      if (dwpe != nullptr) {
        float* g = dwpe + static_cast<size_t>(pos != nullptr ? pos[bt] : bt % T) * C;
        for (int c = c0; c < c1; ++c) g[c] += d[c];
      }
    }
  }
}

namespace {
// Columns of this shard that are real tokens (global id < V): [0, valid).
int valid_columns(int Vl, int vocab_begin, int V) { return std::clamp(V - vocab_begin, 0, Vl); }
}  // namespace

void crossentropy_max_forward(float* row_max, const float* logits, int N, int Vl, int vocab_begin,
                              int V) {
  const int valid = valid_columns(Vl, vocab_begin, V);
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const float* l = logits + static_cast<size_t>(n) * Vl;
    float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
    for (int v = 0; v < valid; ++v) mx = std::max(mx, l[v]);
    row_max[n] = mx;
  }
}

void crossentropy_stats_forward(float* stats, const float* logits, const float* row_max,
                                const int* targets, int N, int Vl, int vocab_begin, int V) {
  const int valid = valid_columns(Vl, vocab_begin, V);
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const float* l = logits + static_cast<size_t>(n) * Vl;
    const float mx = row_max[n];
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int v = 0; v < valid; ++v) sum += fast_exp(l[v] - mx);
    const int local = targets[n] - vocab_begin;
    stats[2 * n] = sum;
    stats[2 * n + 1] = (local >= 0 && local < valid) ? l[local] : 0.0f;
  }
}

void crossentropy_forward(float* losses, const float* stats, const float* row_max, int N) {
  for (int n = 0; n < N; ++n) losses[n] = std::log(stats[2 * n]) + row_max[n] - stats[2 * n + 1];
}

void crossentropy_backward(float* dlogits, const float* logits, const float* row_max,
                           const float* stats, const int* targets, float dloss, int N, int Vl,
                           int vocab_begin, int V) {
  const int valid = valid_columns(Vl, vocab_begin, V);
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const float* l = logits + static_cast<size_t>(n) * Vl;
    float* d = dlogits + static_cast<size_t>(n) * Vl;
    const float mx = row_max[n];
    const float scale = dloss / stats[2 * n];
#pragma omp simd
    for (int v = 0; v < valid; ++v) d[v] = fast_exp(l[v] - mx) * scale;
    for (int v = valid; v < Vl; ++v) d[v] = 0.0f;
    const int local = targets[n] - vocab_begin;
    if (local >= 0 && local < valid) d[local] -= dloss;
  }
}

void mask_losses(float* losses, const int* targets, int N) {
  for (int n = 0; n < N; ++n)
    if (targets[n] < 0) losses[n] = 0.0f;
}

void mask_rows(float* dlogits, const int* targets, int N, int Vl) {
  for (int n = 0; n < N; ++n)
    if (targets[n] < 0) std::fill_n(dlogits + static_cast<size_t>(n) * Vl, Vl, 0.0f);
}

}  // namespace holmes::model::cpu
