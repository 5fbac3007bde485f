// Causal self-attention with grouped-query heads: NH query heads share KVH key/value heads
// (head h reads key/value head h / (NH / KVH); GPT-2 is KVH = NH). One (batch, head) pair per
// OpenMP work item in the forward, one (batch, key/value head) in the backward (its group's
// query heads in order, so dk and dv sum in a fixed order); inside, the products are
// single-threaded sgemm calls (OpenBLAS runs one thread when called inside a parallel
// region), so long sequences run at GEMM speed. The full T x T score matrix is computed and
// the part above the diagonal discarded: twice the needed flops, still far faster than
// dot-product loops. With document positions (data.document_mask) the softmax also drops the
// keys before a query's document; the backward needs nothing more, since the probabilities it
// reads are 0 there (and so are their gradients).
#include <cblas.h>

#include <cmath>

#include "model/cpu/cpu_ops.hpp"
#include "model/cpu/fast_math.hpp"

namespace holmes::model::cpu {
namespace {

// Row t of the scores (T) -> softmax probabilities over keys lo..t (lo = 0: causal; lo > 0:
// the first key of t's document); entries outside become 0.
void causal_softmax_row(float* a, int t, int T, int lo = 0) {
  float mx = -INFINITY;
  for (int t2 = lo; t2 <= t; ++t2) mx = a[t2] > mx ? a[t2] : mx;
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int t2 = lo; t2 <= t; ++t2) {
    a[t2] = fast_exp(a[t2] - mx);
    sum += a[t2];
  }
  const float inv = 1.0f / sum;
#pragma omp simd
  for (int t2 = lo; t2 <= t; ++t2) a[t2] *= inv;
  for (int t2 = 0; t2 < lo; ++t2) a[t2] = 0.0f;
  for (int t2 = t + 1; t2 < T; ++t2) a[t2] = 0.0f;
}

// Where head h's q and its group's k and v start in row 0 of sequence b of qkv.
struct Heads {
  int HS, W, group;  // head size, qkv row width (NH + 2 KVH) * HS, query heads per kv head
  int NH, KVH;
  size_t seq(int b, int T) const { return static_cast<size_t>(b) * T * W; }
  size_t q(int h) const { return static_cast<size_t>(h) * HS; }
  size_t k(int g) const { return static_cast<size_t>(NH + g) * HS; }
  size_t v(int g) const { return static_cast<size_t>(NH + KVH + g) * HS; }
};

Heads heads_of(int C, int NH, int KVH) {
  const int HS = C / NH;
  return {HS, (NH + 2 * KVH) * HS, NH / KVH, NH, KVH};
}

// Softmax backward of one head, row by row: ds = p * (dp - sum(p * dp)) * scale, 0 above the
// diagonal. ds holds dp on entry.
void softmax_backward_rows(float* ds, const float* p, int T, float scale) {
  for (int t = 0; t < T; ++t) {
    const float* pr = p + static_cast<size_t>(t) * T;
    float* dr = ds + static_cast<size_t>(t) * T;
    float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
    for (int t2 = 0; t2 <= t; ++t2) dot += pr[t2] * dr[t2];
#pragma omp simd
    for (int t2 = 0; t2 <= t; ++t2) dr[t2] = pr[t2] * (dr[t2] - dot) * scale;
    for (int t2 = t + 1; t2 < T; ++t2) dr[t2] = 0.0f;
  }
}

}  // namespace

void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C, int NH, int KVH,
                       const int* pos) {
  const Heads d = heads_of(C, NH, KVH);
  const int HS = d.HS, W = d.W;
  const float scale = 1.0f / std::sqrt(static_cast<float>(HS));
#pragma omp parallel for collapse(2) schedule(static)
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < NH; ++h) {
      const float* base = qkv + d.seq(b, T);
      const float* q = base + d.q(h);  // (T,HS), row stride W
      const float* k = base + d.k(h / d.group);
      const float* v = base + d.v(h / d.group);
      float* p = att + (static_cast<size_t>(b) * NH + h) * T * T;  // (T,T)
      float* o = out + static_cast<size_t>(b) * T * C + h * HS;      // (T,HS), row stride C
      // scores = scale * q @ k^T, then row-wise causal softmax
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, HS, scale, q, W, k, W, 0.0f, p, T);
      // Document masking: query t sees keys from its document's first token, t - pos[t].
      const int* doc = pos != nullptr ? pos + static_cast<size_t>(b) * T : nullptr;
      for (int t = 0; t < T; ++t) causal_softmax_row(p + static_cast<size_t>(t) * T, t, T, doc ? t - doc[t] : 0);
      // out = p @ v
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, HS, T, 1.0f, p, T, v, W, 0.0f, o, C);
    }
  }
}

void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv, const float* att, int B,
                        int T, int C, int NH, int KVH) {
  const Heads d = heads_of(C, NH, KVH);
  const int HS = d.HS, W = d.W;
  const float scale = 1.0f / std::sqrt(static_cast<float>(HS));
#pragma omp parallel for collapse(2) schedule(static)
  for (int b = 0; b < B; ++b) {
    for (int g = 0; g < KVH; ++g) {
      const float* base = qkv + d.seq(b, T);
      const float* k = base + d.k(g);
      const float* v = base + d.v(g);
      float* dk = dqkv + d.seq(b, T) + d.k(g);
      float* dv = dqkv + d.seq(b, T) + d.v(g);
      // The group's query heads in order; the first writes dk and dv, the others add.
      for (int j = 0; j < d.group; ++j) {
        const int h = g * d.group + j;
        const float beta = j == 0 ? 0.0f : 1.0f;
        const float* q = base + d.q(h);
        float* dq = dqkv + d.seq(b, T) + d.q(h);
        const float* p = att + (static_cast<size_t>(b) * NH + h) * T * T;
        float* ds = scratch + (static_cast<size_t>(b) * NH + h) * T * T;
        const float* dy = dout + static_cast<size_t>(b) * T * C + h * HS;
        // dv (+)= p^T @ dy;  dp = dy @ v^T
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, HS, T, 1.0f, p, T, dy, C, beta, dv, W);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, HS, 1.0f, dy, C, v, W, 0.0f, ds, T);
        softmax_backward_rows(ds, p, T, scale);
        // dq = ds @ k;  dk (+)= ds^T @ q
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, HS, T, 1.0f, ds, T, k, W, 0.0f, dq, W);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, HS, T, 1.0f, ds, T, q, W, beta, dk, W);
      }
    }
  }
}

}  // namespace holmes::model::cpu
