// Causal self-attention (attention.hpp, the exact method), correctness-first: the forward gives one warp to
// each (b, h, t) query row; the backward first turns each row's probabilities into score
// gradients (one warp per row), then one thread per (b, t, h, i) gathers dq, dk and dv for
// its element, so nothing is accumulated across threads and no atomics are needed.
// qkv (B,T,3C) holds [q | k | v], head h at channels [h*HS, (h+1)*HS) of each block.
#include <cmath>

#include "cuda/check.hpp"
#include "cuda/attention.hpp"
#include "cuda/warp.cuh"

namespace holmes::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kRowsPerBlock = kThreads / kWarpSize;

struct Dims {
  int B, T, C, NH, HS;
  float scale;  // 1 / sqrt(HS)
  __device__ long long qkv_at(int b, int t) const { return ((long long)b * T + t) * 3 * C; }
  __device__ long long att_row(int b, int h, int t) const {
    return (((long long)b * NH + h) * T + t) * T;
  }
};

__global__ void attention_forward_kernel(float* out, float* att, const float* qkv, Dims d) {
  long long row = blockIdx.x * (long long)kRowsPerBlock + threadIdx.x / kWarpSize;
  int lane = threadIdx.x % kWarpSize;
  if (row >= (long long)d.B * d.NH * d.T) return;
  int t = int(row % d.T), h = int(row / d.T % d.NH), b = int(row / ((long long)d.T * d.NH));
  const float* q = qkv + d.qkv_at(b, t) + h * d.HS;
  float* a = att + d.att_row(b, h, t);
  float mx = -INFINITY;
  for (int t2 = lane; t2 <= t; t2 += kWarpSize) {
    const float* k = qkv + d.qkv_at(b, t2) + d.C + h * d.HS;
    float dot = 0.0f;
    for (int i = 0; i < d.HS; ++i) dot += q[i] * k[i];
    a[t2] = dot * d.scale;
    mx = fmaxf(mx, a[t2]);
  }
  mx = warp_max(mx);
  float sum = 0.0f;
  for (int t2 = lane; t2 <= t; t2 += kWarpSize) {
    a[t2] = expf(a[t2] - mx);
    sum += a[t2];
  }
  const float inv = 1.0f / warp_sum(sum);
  for (int t2 = lane; t2 < d.T; t2 += kWarpSize) a[t2] = t2 <= t ? a[t2] * inv : 0.0f;
  __syncwarp();  // every lane reads all of a[] below
  float* o = out + ((long long)b * d.T + t) * d.C + h * d.HS;
  for (int i = lane; i < d.HS; i += kWarpSize) {
    float acc = 0.0f;
    for (int t2 = 0; t2 <= t; ++t2) acc += a[t2] * qkv[d.qkv_at(b, t2) + 2 * d.C + h * d.HS + i];
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
    const float* v = qkv + d.qkv_at(b, t2) + 2 * d.C + h * d.HS;
    float dp = 0.0f;
    for (int i = 0; i < d.HS; ++i) dp += dy[i] * v[i];
    ds[t2] = dp;  // dp for now; each lane rewrites only its own entries below
    dot_sum += a[t2] * dp;
  }
  dot_sum = warp_sum(dot_sum);
  for (int t2 = lane; t2 < d.T; t2 += kWarpSize)
    ds[t2] = t2 <= t ? a[t2] * (ds[t2] - dot_sum) * d.scale : 0.0f;
}

// One thread per (b, t, h, i): dq[t] = sum_{t2<=t} ds[t,t2] k[t2]; dk[t] = sum_{t3>=t}
// ds[t3,t] q[t3]; dv[t] = sum_{t3>=t} p[t3,t] dout[t3].
__global__ void attention_dqkv_kernel(float* dqkv, const float* scratch, const float* dout,
                                      const float* qkv, const float* att, Dims d) {
  long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (idx >= (long long)d.B * d.T * d.C) return;
  int c = int(idx % d.C), t = int(idx / d.C % d.T), b = int(idx / ((long long)d.C * d.T));
  int h = c / d.HS;
  float dq = 0.0f, dk = 0.0f, dv = 0.0f;
  const float* ds_row = scratch + d.att_row(b, h, t);
  for (int t2 = 0; t2 <= t; ++t2) dq += ds_row[t2] * qkv[d.qkv_at(b, t2) + d.C + c];
  for (int t3 = t; t3 < d.T; ++t3) {
    long long cell = d.att_row(b, h, t3) + t;
    dk += scratch[cell] * qkv[d.qkv_at(b, t3) + c];
    dv += att[cell] * dout[((long long)b * d.T + t3) * d.C + c];
  }
  float* base = dqkv + d.qkv_at(b, t);
  base[c] = dq;
  base[d.C + c] = dk;
  base[2 * d.C + c] = dv;
}

Dims make_dims(int B, int T, int C, int NH) {
  return Dims{B, T, C, NH, C / NH, 1.0f / std::sqrt(float(C / NH))};
}

int blocks_for(long long n, int per_block) { return int((n + per_block - 1) / per_block); }

}  // namespace

void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C, int NH,
                       cudaStream_t stream) {
  if (B <= 0 || T <= 0 || C <= 0 || NH <= 0) return;
  Dims d = make_dims(B, T, C, NH);
  attention_forward_kernel<<<blocks_for((long long)B * NH * T, kRowsPerBlock), kThreads, 0,
                             stream>>>(out, att, qkv, d);
  HOLMES_CUDA_CHECK(cudaGetLastError());
}

void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv,
                        const float* att, int B, int T, int C, int NH, cudaStream_t stream) {
  if (B <= 0 || T <= 0 || C <= 0 || NH <= 0) return;
  Dims d = make_dims(B, T, C, NH);
  attention_dscore_kernel<<<blocks_for((long long)B * NH * T, kRowsPerBlock), kThreads, 0,
                            stream>>>(scratch, dout, qkv, att, d);
  HOLMES_CUDA_CHECK(cudaGetLastError());
  attention_dqkv_kernel<<<blocks_for((long long)B * T * C, kThreads), kThreads, 0, stream>>>(
      dqkv, scratch, dout, qkv, att, d);
  HOLMES_CUDA_CHECK(cudaGetLastError());
}

}  // namespace holmes::cuda
