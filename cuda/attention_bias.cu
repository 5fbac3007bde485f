// document_bias (attention_bias.hpp).
#include "cuda/attention_bias.hpp"
#include "cuda/attention_plan.hpp"
#include "cuda/check.hpp"

namespace holmes::cuda {

namespace {

constexpr int kThreads = 256;

// Block r = b * T + t writes row r of T columns; bf16 written as bits so 0 and the lowest
// value are exact.
__global__ void document_bias_kernel(unsigned short* bias, const int* pos, int T) {
  const long long r = blockIdx.x;
  const int t = int(r % T);
  const int lo = t - pos[r];
  unsigned short* row = bias + r * T;
  for (int j = threadIdx.x; j < T; j += blockDim.x)
    row[j] = j >= lo && j <= t ? 0 : kBf16LowestBits;
}

}  // namespace

void document_bias(__nv_bfloat16* bias, const int* pos, int B, int T, cudaStream_t stream) {
  if (B <= 0 || T <= 0) return;
  document_bias_kernel<<<B * T, kThreads, 0, stream>>>(reinterpret_cast<unsigned short*>(bias), pos, T);
  HOLMES_CUDA_CHECK(cudaGetLastError());
}

}  // namespace holmes::cuda
