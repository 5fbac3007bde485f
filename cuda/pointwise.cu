// Element-wise kernels of pointwise.hpp. Grid-stride loops so any N works with a capped grid;
// bf16 values are widened to fp32 for the arithmetic and rounded once on store.
#include "cuda/check.hpp"
#include "cuda/pack.cuh"
#include "cuda/pointwise.hpp"
#include "cuda/scratch.hpp"

namespace holmes::cuda {

namespace {

constexpr int kThreads = 256;
constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2/pi)
constexpr float kGeluCube = 0.044715f;

int grid_for(std::size_t n) {
  std::size_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < 65535 ? (blocks ? blocks : 1) : 65535);
}

template <class T>
__global__ void gelu_forward_kernel(T* out, const T* inp, std::size_t n) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n;
       i += std::size_t{gridDim.x} * blockDim.x) {
    float x = widen(inp[i]);
    float u = kGeluScale * (x + kGeluCube * x * x * x);
    out[i] = narrow<T>(0.5f * x * (1.0f + tanhf(u)));
  }
}

template <class T>
__global__ void gelu_backward_kernel(T* dinp, const T* inp, const T* dout, std::size_t n) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n;
       i += std::size_t{gridDim.x} * blockDim.x) {
    float x = widen(inp[i]);
    float u = kGeluScale * (x + kGeluCube * x * x * x);
    float t = tanhf(u);
    // d/dx [0.5 x (1 + tanh u)] = 0.5 (1 + t) + 0.5 x (1 - t^2) du/dx
    float du = kGeluScale * (1.0f + 3.0f * kGeluCube * x * x);
    float grad = 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
    dinp[i] = narrow<T>(grad * widen(dout[i]));
  }
}

template <class T>
__global__ void residual_forward_kernel(T* out, const T* inp1, const T* inp2, std::size_t n) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n;
       i += std::size_t{gridDim.x} * blockDim.x)
    out[i] = narrow<T>(widen(inp1[i]) + widen(inp2[i]));
}

// 16-byte packs: n_packs packs of kW elements.
template <class T, int kW>
__global__ void residual_forward_packed_kernel(T* out, const T* inp1, const T* inp2, std::size_t n_packs) {
  for (std::size_t q = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; q < n_packs;
       q += std::size_t{gridDim.x} * blockDim.x) {
    float a[kW], b[kW];
    load_vec<kW>(a, inp1 + q * kW);
    load_vec<kW>(b, inp2 + q * kW);
#pragma unroll
    for (int k = 0; k < kW; ++k) a[k] += b[k];
    store_vec<kW>(out + q * kW, a);
  }
}

template <class T>
__global__ void residual_backward_kernel(T* da, T* db, const T* dout, std::size_t n) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n;
       i += std::size_t{gridDim.x} * blockDim.x) {
    float g = widen(dout[i]);
    if (da) da[i] = narrow<T>(widen(da[i]) + g);
    if (db) db[i] = narrow<T>(widen(db[i]) + g);
  }
}

// Column sums in a fixed order: a block owns 32 adjacent channels (one per lane, so each
// row is read coalesced) and a chunk of kBiasChunkRows rows (blockIdx.y); its 8 warps take
// every 8th row of the chunk, and the 8 partial sums are added in warp order through shared
// memory. One chunk adds straight into dbias; several write one partial per chunk, which a
// second kernel adds in chunk order (so a GPT-2 step's 16384 rows keep every SM busy). No
// atomics: the result repeats bit for bit.
constexpr int kBiasCols = 32, kBiasRowLanes = 8, kBiasChunkRows = 1024;

template <class G, class T>
__global__ void bias_backward_kernel(G* dbias, float* partials, const T* dout, int rows, int oc) {
  __shared__ float part[kBiasRowLanes][kBiasCols];
  const int lane = threadIdx.x % kBiasCols, warp = threadIdx.x / kBiasCols;
  const int col = blockIdx.x * kBiasCols + lane;
  const int first = blockIdx.y * kBiasChunkRows, last = min(rows, first + kBiasChunkRows);
  float sum = 0.0f;
  if (col < oc)
    for (int r = first + warp; r < last; r += kBiasRowLanes) sum += widen(dout[std::size_t(r) * oc + col]);
  part[warp][lane] = sum;
  __syncthreads();
  if (warp != 0 || col >= oc) return;
  float total = 0.0f;
  for (int w = 0; w < kBiasRowLanes; ++w) total += part[w][lane];
  if (partials != nullptr)
    partials[std::size_t(blockIdx.y) * oc + col] = total;
  else
    dbias[col] = narrow<G>(widen(dbias[col]) + total);
}

// The same sums with 16-byte loads, when oc is a multiple of a pack and dout is 16-byte
// aligned: a lane owns kW adjacent channels (a warp reads 512 contiguous bytes of a bf16 row),
// a block 32 * kW channels and kBiasPackedChunkRows rows, its 8 warps every 8th row; the
// chunk's partials always go to `partials` (the finish kernel adds them in chunk order).
constexpr int kBiasPackedChunkRows = 256;

template <class T, int kW>
__global__ void bias_backward_packed_kernel(float* partials, const T* dout, int rows, int oc) {
  __shared__ float part[kBiasRowLanes][kBiasCols * kW];
  const int lane = threadIdx.x % kBiasCols, warp = threadIdx.x / kBiasCols;
  const int col = (blockIdx.x * kBiasCols + lane) * kW;
  const int first = blockIdx.y * kBiasPackedChunkRows, last = min(rows, first + kBiasPackedChunkRows);
  float sum[kW];
#pragma unroll
  for (int k = 0; k < kW; ++k) sum[k] = 0.0f;
  if (col < oc) {
#pragma unroll 4
    for (int r = first + warp; r < last; r += kBiasRowLanes) {
      float x[kW];
      load_vec<kW>(x, dout + std::size_t(r) * oc + col);
#pragma unroll
      for (int k = 0; k < kW; ++k) sum[k] += x[k];
    }
  }
#pragma unroll
  for (int k = 0; k < kW; ++k) part[warp][lane * kW + k] = sum[k];
  __syncthreads();
  // Thread t of the block adds column t of the block's 32 * kW in warp order.
  for (int c = threadIdx.x; c < kBiasCols * kW; c += blockDim.x) {
    const int out = blockIdx.x * kBiasCols * kW + c;
    if (out >= oc) continue;
    float total = 0.0f;
    for (int w = 0; w < kBiasRowLanes; ++w) total += part[w][c];
    partials[std::size_t(blockIdx.y) * oc + out] = total;
  }
}

template <class G>
__global__ void bias_finish_kernel(G* dbias, const float* partials, int chunks, int oc) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (col >= oc) return;
  float total = 0.0f;
  for (int c = 0; c < chunks; ++c) total += partials[std::size_t(c) * oc + col];
  dbias[col] = narrow<G>(widen(dbias[col]) + total);
}

template <class Out, class In>
__global__ void convert_kernel(Out* out, const In* inp, std::size_t n) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n;
       i += std::size_t{gridDim.x} * blockDim.x)
    out[i] = narrow<Out>(widen(inp[i]));
}

template <class T>
void launch_gelu_forward(T* out, const T* inp, std::size_t n, cudaStream_t stream) {
  if (n == 0) return;
  gelu_forward_kernel<<<grid_for(n), kThreads, 0, stream>>>(out, inp, n);
  HOLMES_CUDA_CHECK(cudaGetLastError());
}

template <class T>
void launch_gelu_backward(T* dinp, const T* inp, const T* dout, std::size_t n,
                          cudaStream_t stream) {
  if (n == 0) return;
  gelu_backward_kernel<<<grid_for(n), kThreads, 0, stream>>>(dinp, inp, dout, n);
  HOLMES_CUDA_CHECK(cudaGetLastError());
}

template <class T>
void launch_residual(T* out, const T* inp1, const T* inp2, std::size_t n, cudaStream_t stream) {
  if (n == 0) return;
  constexpr int kW = kPack<T>;
  if (n % kW == 0 && is_aligned16(out) && is_aligned16(inp1) && is_aligned16(inp2)) {
    residual_forward_packed_kernel<T, kW><<<grid_for(n / kW), kThreads, 0, stream>>>(out, inp1, inp2, n / kW);
    HOLMES_CUDA_CHECK(cudaGetLastError());
    return;
  }
  residual_forward_kernel<<<grid_for(n), kThreads, 0, stream>>>(out, inp1, inp2, n);
  HOLMES_CUDA_CHECK(cudaGetLastError());
}

template <class T>
void launch_residual_backward(T* da, T* db, const T* dout, std::size_t n, cudaStream_t stream) {
  if (n == 0 || (!da && !db)) return;
  residual_backward_kernel<<<grid_for(n), kThreads, 0, stream>>>(da, db, dout, n);
  HOLMES_CUDA_CHECK(cudaGetLastError());
}

template <class G, class T>
void launch_bias_backward(G* dbias, const T* dout, int rows, int oc, cudaStream_t stream) {
  if (rows <= 0 || oc <= 0) return;
  constexpr int kW = kPack<T>;
  const long long packed_chunks = (rows + kBiasPackedChunkRows - 1) / kBiasPackedChunkRows;
  if (oc % kW == 0 && is_aligned16(dout) && packed_chunks <= 65535) {
    const int chunks = int(packed_chunks);
    StreamScratch scratch(std::size_t(chunks) * oc * sizeof(float), stream);
    float* partials = scratch.at<float>(0);
    const dim3 grid((oc / kW + kBiasCols - 1) / kBiasCols, chunks);
    bias_backward_packed_kernel<T, kW><<<grid, kBiasCols * kBiasRowLanes, 0, stream>>>(partials, dout, rows, oc);
    HOLMES_CUDA_CHECK(cudaGetLastError());
    bias_finish_kernel<<<(oc + kThreads - 1) / kThreads, kThreads, 0, stream>>>(dbias, partials, chunks, oc);
    HOLMES_CUDA_CHECK(cudaGetLastError());
    scratch.release();
    return;
  }
  const int chunks = (rows + kBiasChunkRows - 1) / kBiasChunkRows;  // <= 2^31 / 1024, within gridDim.y
  const dim3 grid((oc + kBiasCols - 1) / kBiasCols, chunks);
  if (chunks == 1) {
    bias_backward_kernel<<<grid, kBiasCols * kBiasRowLanes, 0, stream>>>(dbias, nullptr, dout, rows, oc);
    HOLMES_CUDA_CHECK(cudaGetLastError());
    return;
  }
  StreamScratch scratch(std::size_t(chunks) * oc * sizeof(float), stream);
  float* partials = scratch.at<float>(0);
  bias_backward_kernel<<<grid, kBiasCols * kBiasRowLanes, 0, stream>>>(dbias, partials, dout, rows, oc);
  HOLMES_CUDA_CHECK(cudaGetLastError());
  bias_finish_kernel<<<(oc + kThreads - 1) / kThreads, kThreads, 0, stream>>>(dbias, partials, chunks, oc);
  HOLMES_CUDA_CHECK(cudaGetLastError());
  scratch.release();
}

template <class Out, class In>
void launch_convert(Out* out, const In* inp, std::size_t n, cudaStream_t stream) {
  if (n == 0) return;
  convert_kernel<<<grid_for(n), kThreads, 0, stream>>>(out, inp, n);
  HOLMES_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void gelu_forward(float* out, const float* inp, std::size_t n, cudaStream_t s) {
  launch_gelu_forward(out, inp, n, s);
}
void gelu_forward(bf16* out, const bf16* inp, std::size_t n, cudaStream_t s) {
  launch_gelu_forward(out, inp, n, s);
}
void gelu_backward(float* dinp, const float* inp, const float* dout, std::size_t n,
                   cudaStream_t s) {
  launch_gelu_backward(dinp, inp, dout, n, s);
}
void gelu_backward(bf16* dinp, const bf16* inp, const bf16* dout, std::size_t n, cudaStream_t s) {
  launch_gelu_backward(dinp, inp, dout, n, s);
}
void residual_forward(float* out, const float* inp1, const float* inp2, std::size_t n,
                      cudaStream_t s) {
  launch_residual(out, inp1, inp2, n, s);
}
void residual_forward(bf16* out, const bf16* inp1, const bf16* inp2, std::size_t n,
                      cudaStream_t s) {
  launch_residual(out, inp1, inp2, n, s);
}
void residual_backward(float* da, float* db, const float* dout, std::size_t n, cudaStream_t s) {
  launch_residual_backward(da, db, dout, n, s);
}
void residual_backward(bf16* da, bf16* db, const bf16* dout, std::size_t n, cudaStream_t s) {
  launch_residual_backward(da, db, dout, n, s);
}
void bias_backward(float* dbias, const float* dout, int rows, int oc, cudaStream_t s) {
  launch_bias_backward(dbias, dout, rows, oc, s);
}
void bias_backward(bf16* dbias, const bf16* dout, int rows, int oc, cudaStream_t s) {
  launch_bias_backward(dbias, dout, rows, oc, s);
}
void bias_backward(float* dbias, const bf16* dout, int rows, int oc, cudaStream_t s) {
  launch_bias_backward(dbias, dout, rows, oc, s);
}
void convert(bf16* out, const float* inp, std::size_t n, cudaStream_t s) { launch_convert(out, inp, n, s); }
void convert(float* out, const bf16* inp, std::size_t n, cudaStream_t s) { launch_convert(out, inp, n, s); }

}  // namespace holmes::cuda
