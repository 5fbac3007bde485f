// Causal self-attention (attention.hpp, the exact method), correctness-first: the forward gives one warp to
// each (b, h, t) query row; the backward first turns each row's probabilities into score
// gradients (one warp per row), then one thread per element of a qkv row gathers its dq, dk or
// dv, so nothing is accumulated across threads and no atomics are needed.
// qkv (B,T,(NH+2KVH)*HS) holds [q (NH heads) | k (KVH heads) | v (KVH heads)] per row.
#include <cmath>

#include "cuda/check.hpp"
#include "cuda/attention.hpp"
#include "cuda/warp.cuh"

namespace holmes::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kRowsPerBlock = kThreads / kWarpSize;

// Query head h reads key/value head h / group; a qkv row holds W = (NH + 2 KVH) HS channels:
// q heads at h HS, k heads at C + g HS, v heads at C + KVH HS + g HS (C = NH HS).
struct Dims {
  int B, T, C, NH, KVH, HS, W, group;
  float scale;  // 1 / sqrt(HS)
  __device__ long long qkv_at(int b, int t) const { return ((long long)b * T + t) * W; }
  __device__ int k_at(int h) const { return C + (h / group) * HS; }
  __device__ int v_at(int h) const { return C + KVH * HS + (h / group) * HS; }
  __device__ long long att_row(int b, int h, int t) const {
    return (((long long)b * NH + h) * T + t) * T;
  }
};

// pos (B,T) or null: query t attends keys lo = t - pos[b,t] .. t (its document), else 0 .. t.
__global__ void attention_forward_kernel(float* out, float* att, const float* qkv, const int* pos, Dims d) {
  long long row = blockIdx.x * (long long)kRowsPerBlock + threadIdx.x / kWarpSize;
  int lane = threadIdx.x % kWarpSize;
  if (row >= (long long)d.B * d.NH * d.T) return;
  int t = int(row % d.T), h = int(row / d.T % d.NH), b = int(row / ((long long)d.T * d.NH));
  const int lo = pos != nullptr ? t - pos[(long long)b * d.T + t] : 0;
  const float* q = qkv + d.qkv_at(b, t) + h * d.HS;
  float* a = att + d.att_row(b, h, t);
  float mx = -INFINITY;
  for (int t2 = lo + lane; t2 <= t; t2 += kWarpSize) {
    const float* k = qkv + d.qkv_at(b, t2) + d.k_at(h);
    float dot = 0.0f;
    for (int i = 0; i < d.HS; ++i) dot += q[i] * k[i];
    a[t2] = dot * d.scale;
    mx = fmaxf(mx, a[t2]);
  }
  mx = warp_max(mx);
  float sum = 0.0f;
  for (int t2 = lo + lane; t2 <= t; t2 += kWarpSize) {
    a[t2] = expf(a[t2] - mx);
    sum += a[t2];
  }
  const float inv = 1.0f / warp_sum(sum);
  for (int t2 = lane; t2 < d.T; t2 += kWarpSize) a[t2] = t2 >= lo && t2 <= t ? a[t2] * inv : 0.0f;
  __syncwarp();  // every lane reads all of a[] below
  float* o = out + ((long long)b * d.T + t) * d.C + h * d.HS;
  for (int i = lane; i < d.HS; i += kWarpSize) {
    float acc = 0.0f;
    for (int t2 = lo; t2 <= t; ++t2) acc += a[t2] * qkv[d.qkv_at(b, t2) + d.v_at(h) + i];
    o[i] = acc;
  }
}

// ds[t2] = p[t2] * (dp[t2] - sum_j p[j] dp[j]) * scale, dp[t2] = dout[t] . v[t2].
__global__ void attention_dscore_kernel(float* scratch, const float* dout, const float* qkv,
                                        const float* att, Dims d) {
  long long row = blockIdx.x * (long long)kRowsPerBlock + threadIdx.x / kWarpSize;
  int lane = threadIdx.x % kWarpSize;
  if (row >= (long long)d.B * d.NH * d.T) return;
  int t = int(row % d.T), h = int(row / d.T % d.NH), b = int(row / ((long long)d.T * d.NH));
  const float* dy = dout + ((long long)b * d.T + t) * d.C + h * d.HS;
  const float* a = att + d.att_row(b, h, t);
  float* ds = scratch + d.att_row(b, h, t);
  float dot_sum = 0.0f;
  for (int t2 = lane; t2 <= t; t2 += kWarpSize) {
    const float* v = qkv + d.qkv_at(b, t2) + d.v_at(h);
    float dp = 0.0f;
    for (int i = 0; i < d.HS; ++i) dp += dy[i] * v[i];
    ds[t2] = dp;  // dp for now; each lane rewrites only its own entries below
    dot_sum += a[t2] * dp;
  }
  dot_sum = warp_sum(dot_sum);
  for (int t2 = lane; t2 < d.T; t2 += kWarpSize)
    ds[t2] = t2 <= t ? a[t2] * (ds[t2] - dot_sum) * d.scale : 0.0f;
}

// One thread per (b, t, c) of a qkv row (W channels):
//   q channel of head h:  dq[t] = sum_{t2<=t} ds[h,t,t2] k[t2];
//   k channel of head g:  dk[t] = sum over the group's heads h, then t3 >= t, of ds[h,t3,t] q_h[t3];
//   v channel of head g:  dv[t] = the same sums of p[h,t3,t] dout_h[t3].
// Each element is one thread's sum in a fixed order: no atomics, deterministic.
__global__ void attention_dqkv_kernel(float* dqkv, const float* scratch, const float* dout,
                                      const float* qkv, const float* att, Dims d) {
  long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (idx >= (long long)d.B * d.T * d.W) return;
  int c = int(idx % d.W), t = int(idx / d.W % d.T), b = int(idx / ((long long)d.W * d.T));
  float acc = 0.0f;
  if (c < d.C) {
    const int h = c / d.HS, i = c % d.HS;
    const float* ds_row = scratch + d.att_row(b, h, t);
    for (int t2 = 0; t2 <= t; ++t2) acc += ds_row[t2] * qkv[d.qkv_at(b, t2) + d.k_at(h) + i];
  } else {
    const bool is_k = c < d.C + d.KVH * d.HS;
    const int within = is_k ? c - d.C : c - d.C - d.KVH * d.HS;
    const int g = within / d.HS, i = within % d.HS;
    for (int j = 0; j < d.group; ++j) {
      const int h = g * d.group + j;
      for (int t3 = t; t3 < d.T; ++t3) {
        const long long cell = d.att_row(b, h, t3) + t;
        if (is_k)
          acc += scratch[cell] * qkv[d.qkv_at(b, t3) + h * d.HS + i];
        else
          acc += att[cell] * dout[((long long)b * d.T + t3) * d.C + h * d.HS + i];
      }
    }
  }
  dqkv[d.qkv_at(b, t) + c] = acc;
}

Dims make_dims(int B, int T, int C, int NH, int KVH) {
  const int HS = C / NH;
  return Dims{B, T, C, NH, KVH, HS, (NH + 2 * KVH) * HS, NH / KVH, 1.0f / std::sqrt(float(HS))};
}

int blocks_for(long long n, int per_block) { return int((n + per_block - 1) / per_block); }

}  // namespace

void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C, int NH, int KVH,
                       cudaStream_t stream) {
  attention_forward(out, att, qkv, nullptr, B, T, C, NH, KVH, stream);
}

void attention_forward(float* out, float* att, const float* qkv, const int* pos, int B, int T, int C, int NH,
                       int KVH, cudaStream_t stream) {
  if (B <= 0 || T <= 0 || C <= 0 || NH <= 0 || KVH <= 0) return;
  Dims d = make_dims(B, T, C, NH, KVH);
  attention_forward_kernel<<<blocks_for((long long)B * NH * T, kRowsPerBlock), kThreads, 0,
                             stream>>>(out, att, qkv, pos, d);
  HOLMES_CUDA_CHECK(cudaGetLastError());
}

void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv,
                        const float* att, int B, int T, int C, int NH, int KVH, cudaStream_t stream) {
  if (B <= 0 || T <= 0 || C <= 0 || NH <= 0 || KVH <= 0) return;
  Dims d = make_dims(B, T, C, NH, KVH);
  attention_dscore_kernel<<<blocks_for((long long)B * NH * T, kRowsPerBlock), kThreads, 0,
                            stream>>>(scratch, dout, qkv, att, d);
  HOLMES_CUDA_CHECK(cudaGetLastError());
  attention_dqkv_kernel<<<blocks_for((long long)B * T * d.W, kThreads), kThreads, 0, stream>>>(
      dqkv, scratch, dout, qkv, att, d);
  HOLMES_CUDA_CHECK(cudaGetLastError());
}

}  // namespace holmes::cuda
