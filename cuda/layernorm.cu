// LayerNorm kernels. Rows are independent: one warp per row, lanes stride over the C
// channels and combine with shuffles (two passes, mean then variance, as the CPU twin does).
// Parameter gradients sum over rows: one thread per channel walks down its column, reads
// coalesced across the warp.
#include "cuda/check.hpp"
#include "cuda/layernorm.hpp"
#include "cuda/warp.cuh"

namespace holmes::cuda {

namespace {

constexpr int kWarp = kWarpSize;
constexpr int kRowsPerBlock = 8;  // 256 threads: 8 warps, one row each
constexpr int kColThreads = 256;
constexpr float kEps = 1e-5f;

__global__ void layernorm_forward_kernel(float* out, float* mean, float* rstd, const float* inp,
                                         const float* weight, const float* bias, int N, int C) {
  int row = blockIdx.x * kRowsPerBlock + threadIdx.x / kWarp;
  int lane = threadIdx.x % kWarp;
  if (row >= N) return;  // whole warp leaves together: shuffles below stay full-warp
  const float* x = inp + std::size_t(row) * C;
  float sum = 0.0f;
  for (int c = lane; c < C; c += kWarp) sum += x[c];
  const float m = warp_sum(sum) / C;
  float var = 0.0f;
  for (int c = lane; c < C; c += kWarp) var += (x[c] - m) * (x[c] - m);
  const float s = rsqrtf(warp_sum(var) / C + kEps);
  float* y = out + std::size_t(row) * C;
  for (int c = lane; c < C; c += kWarp) y[c] = (x[c] - m) * s * weight[c] + bias[c];
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = s;
  }
}

__global__ void layernorm_backward_rows_kernel(float* dinp, const float* dout, const float* inp,
                                               const float* weight, const float* mean,
                                               const float* rstd, int N, int C) {
  int row = blockIdx.x * kRowsPerBlock + threadIdx.x / kWarp;
  int lane = threadIdx.x % kWarp;
  if (row >= N) return;
  const float* x = inp + std::size_t(row) * C;
  const float* dy = dout + std::size_t(row) * C;
  const float m = mean[row], s = rstd[row];
  float dnorm_mean = 0.0f, dnorm_norm_mean = 0.0f;
  for (int c = lane; c < C; c += kWarp) {
    float dnorm = weight[c] * dy[c];
    dnorm_mean += dnorm;
    dnorm_norm_mean += dnorm * (x[c] - m) * s;
  }
  dnorm_mean = warp_sum(dnorm_mean) / C;
  dnorm_norm_mean = warp_sum(dnorm_norm_mean) / C;
  float* dx = dinp + std::size_t(row) * C;
  for (int c = lane; c < C; c += kWarp) {
    float norm = (x[c] - m) * s;
    dx[c] += s * (weight[c] * dy[c] - dnorm_mean - norm * dnorm_norm_mean);
  }
}

__global__ void layernorm_backward_params_kernel(float* dweight, float* dbias, const float* dout,
                                                 const float* inp, const float* mean,
                                                 const float* rstd, int N, int C) {
  int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  float dw = 0.0f, db = 0.0f;
  for (int r = 0; r < N; ++r) {
    std::size_t i = std::size_t(r) * C + c;
    dw += (inp[i] - mean[r]) * rstd[r] * dout[i];
    db += dout[i];
  }
  dweight[c] += dw;
  dbias[c] += db;
}

int row_blocks(int N) { return (N + kRowsPerBlock - 1) / kRowsPerBlock; }

}  // namespace

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int N, int C, cudaStream_t stream) {
  if (N <= 0 || C <= 0) return;
  layernorm_forward_kernel<<<row_blocks(N), kRowsPerBlock * kWarp, 0, stream>>>(
      out, mean, rstd, inp, weight, bias, N, C);
  HOLMES_CUDA_CHECK(cudaGetLastError());
}

void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* mean, const float* rstd,
                        int N, int C, cudaStream_t stream) {
  if (N <= 0 || C <= 0) return;
  layernorm_backward_rows_kernel<<<row_blocks(N), kRowsPerBlock * kWarp, 0, stream>>>(
      dinp, dout, inp, weight, mean, rstd, N, C);
  HOLMES_CUDA_CHECK(cudaGetLastError());
  layernorm_backward_params_kernel<<<(C + kColThreads - 1) / kColThreads, kColThreads, 0, stream>>>(
      dweight, dbias, dout, inp, mean, rstd, N, C);
  HOLMES_CUDA_CHECK(cudaGetLastError());
}

}  // namespace holmes::cuda
