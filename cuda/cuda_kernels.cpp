#include "cuda/cuda_kernels.hpp"

#include "cuda/gemm.hpp"
#include "cuda/pointwise.hpp"
#include "cuda/layernorm.hpp"
#include "cuda/matmul.hpp"
#include "cuda/attention.hpp"
#include "cuda/vocab.hpp"
#include "cuda/optimizer.hpp"

namespace holmes::cuda {

namespace {

class CudaKernels final : public model::Kernels {
 public:
  explicit CudaKernels(cudaStream_t stream) : stream_(stream) {}
  const char* name() const override { return "cuda"; }

  void embedding_forward(float* out, const int* tokens, const float* wte, const float* wpe, int B,
                         int T, int C, int vb, int Vl) override {
    cuda::embedding_forward(out, tokens, wte, wpe, B, T, C, vb, Vl, stream_);
  }
  void embedding_backward(float* dwte, float* dwpe, const float* dout, const int* tokens, int B,
                          int T, int C, int vb, int Vl) override {
    cuda::embedding_backward(dwte, dwpe, dout, tokens, B, T, C, vb, Vl, stream_);
  }
  void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* w,
                         const float* b, int N, int C) override {
    cuda::layernorm_forward(out, mean, rstd, inp, w, b, N, C, stream_);
  }
  void layernorm_backward(float* dinp, float* dw, float* db, const float* dout, const float* inp,
                          const float* w, const float* mean, const float* rstd, int N,
                          int C) override {
    cuda::layernorm_backward(dinp, dw, db, dout, inp, w, mean, rstd, N, C, stream_);
  }
  void matmul_forward(float* out, const float* inp, const float* w, const float* b, int N, int C,
                      int OC) override {
    cuda::matmul_forward(gemm_, out, inp, w, b, N, C, OC, DType::kF32, stream_);
  }
  void matmul_backward(float* dinp, float* dw, float* db, const float* dout, const float* inp,
                       const float* w, int N, int C, int OC) override {
    cuda::matmul_backward(gemm_, dinp, dw, db, dout, inp, w, N, C, OC, DType::kF32, stream_);
  }
  void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C,
                         int NH) override {
    cuda::attention_forward(out, att, qkv, B, T, C, NH, stream_);
  }
  void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv,
                          const float* /*out*/, const float* att, int B, int T, int C,
                          int NH) override {
    cuda::attention_backward(dqkv, scratch, dout, qkv, att, B, T, C, NH, stream_);
  }
  void gelu_forward(float* out, const float* inp, size_t n) override {
    cuda::gelu_forward(out, inp, n, stream_);
  }
  void gelu_backward(float* dinp, const float* inp, const float* dout, size_t n) override {
    cuda::gelu_backward(dinp, inp, dout, n, stream_);
  }
  void residual_forward(float* out, const float* a, const float* b, size_t n) override {
    cuda::residual_forward(out, a, b, n, stream_);
  }
  void residual_backward(float* da, float* db, const float* dout, size_t n) override {
    cuda::residual_backward(da, db, dout, n, stream_);
  }
  void crossentropy_max_forward(float* row_max, const float* logits, int N, int Vl, int vb,
                                int V) override {
    cuda::crossentropy_max_forward(row_max, logits, N, Vl, vb, V, stream_);
  }
  void crossentropy_stats_forward(float* stats, const float* logits, const float* row_max,
                                  const int* targets, int N, int Vl, int vb, int V) override {
    cuda::crossentropy_stats_forward(stats, logits, row_max, targets, N, Vl, vb, V, stream_);
  }
  void crossentropy_forward(float* losses, const float* stats, const float* row_max,
                            int N) override {
    cuda::crossentropy_forward(losses, stats, row_max, N, stream_);
  }
  void crossentropy_backward(float* dlogits, const float* logits, const float* row_max,
                             const float* stats, const int* targets, float dloss, int N, int Vl,
                             int vb, int V) override {
    cuda::crossentropy_backward(dlogits, logits, row_max, stats, targets, dloss, N, Vl, vb, V,
                                stream_);
  }

  void mean_forward(float* mean, const float* x, int N) override { cuda::mean_forward(mean, x, N, stream_); }
  void scale_forward(float* x, float s, size_t n) override { cuda::scale_forward(x, s, n, stream_); }
  void sum_squares_forward(double* sq, const float* x, size_t n) override {
    cuda::sum_squares_forward(sq, x, n, stream_);
  }
  void adamw_update(float* params, float* m, float* v, const float* grads, size_t n,
                    const model::AdamWStep& s) override {
    cuda::adamw_update(params, m, v, grads, n, s, stream_);
  }

 private:
  cudaStream_t stream_;
  GemmRunner gemm_;
};

}  // namespace

std::unique_ptr<model::Kernels> make_cuda_kernels(cudaStream_t stream) {
  return std::make_unique<CudaKernels>(stream);
}

}  // namespace holmes::cuda
