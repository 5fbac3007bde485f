#include "model/cpu/cpu_kernels.hpp"

#include "model/cpu/blas_core.hpp"
#include "model/cpu/cpu_ops.hpp"

namespace holmes::model::cpu {
namespace {

// Forwards every Kernels op to the free function of the same name in cpu_ops.hpp.
class CpuKernels final : public Kernels {
 public:
  const char* name() const override { return "cpu"; }
  void embedding_forward(float* out, const int* tokens, const float* wte, const float* wpe, int B,
                         int T, int C, int vb, int Vl) override {
    cpu::embedding_forward(out, tokens, wte, wpe, B, T, C, vb, Vl);
  }
  void embedding_backward(float* dwte, float* dwpe, const float* dout, const int* tokens, int B,
                          int T, int C, int vb, int Vl) override {
    cpu::embedding_backward(dwte, dwpe, dout, tokens, B, T, C, vb, Vl);
  }
  void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* w,
                         const float* b, int N, int C) override {
    cpu::layernorm_forward(out, mean, rstd, inp, w, b, N, C);
  }
  void layernorm_backward(float* dinp, float* dw, float* db, const float* dout, const float* inp,
                          const float* w, const float* mean, const float* rstd, int N,
                          int C) override {
    cpu::layernorm_backward(dinp, dw, db, dout, inp, w, mean, rstd, N, C);
  }
  void matmul_forward(float* out, const float* inp, const float* w, const float* b, int N, int C,
                      int OC) override {
    cpu::matmul_forward(out, inp, w, b, N, C, OC);
  }
  void matmul_backward(float* dinp, float* dw, float* db, const float* dout, const float* inp,
                       const float* w, int N, int C, int OC) override {
    cpu::matmul_backward(dinp, dw, db, dout, inp, w, N, C, OC);
  }
  void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* w, int N, int C,
                       float eps) override {
    cpu::rmsnorm_forward(out, rstd, inp, w, N, C, eps);
  }
  void rmsnorm_backward(float* dinp, float* dw, const float* dout, const float* inp, const float* w,
                        const float* rstd, int N, int C) override {
    cpu::rmsnorm_backward(dinp, dw, dout, inp, w, rstd, N, C);
  }
  void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C, int NH,
                         int KVH) override {
    cpu::attention_forward(out, att, qkv, B, T, C, NH, KVH);
  }
  void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv,
                          const float* /*out*/, const float* att, int B, int T, int C, int NH,
                          int KVH) override {
    cpu::attention_backward(dqkv, scratch, dout, qkv, att, B, T, C, NH, KVH);
  }
  void rope_forward(float* out, const float* inp, const float* cos_sin, int B, int T, int H, int HS,
                    int stride) override {
    cpu::rope_forward(out, inp, cos_sin, B, T, H, HS, stride);
  }
  void rope_backward(float* dinp, const float* dout, const float* cos_sin, int B, int T, int H, int HS,
                     int stride) override {
    cpu::rope_backward(dinp, dout, cos_sin, B, T, H, HS, stride);
  }
  // Document masking: the same ops reading pos (nullptr: exactly the ops above).
  void attention_forward(float* out, float* att, const float* qkv, const int* pos, int B, int T, int C, int NH,
                         int KVH) override {
    cpu::attention_forward(out, att, qkv, B, T, C, NH, KVH, pos);
  }
  // The probabilities are 0 outside each document's block, and so are their gradients.
  void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv, const float* /*out*/,
                          const float* att, const int* /*pos*/, int B, int T, int C, int NH, int KVH) override {
    cpu::attention_backward(dqkv, scratch, dout, qkv, att, B, T, C, NH, KVH);
  }
  void rope_forward(float* out, const float* inp, const float* cs, const int* pos, int B, int T, int H, int HS,
                    int stride) override {
    cpu::rope_forward(out, inp, cs, B, T, H, HS, stride, pos);
  }
  void rope_backward(float* dinp, const float* dout, const float* cs, const int* pos, int B, int T, int H, int HS,
                     int stride) override {
    cpu::rope_backward(dinp, dout, cs, B, T, H, HS, stride, pos);
  }
  void embedding_forward(float* out, const int* tokens, const int* pos, const float* wte, const float* wpe, int B,
                         int T, int C, int vb, int Vl) override {
    cpu::embedding_forward(out, tokens, wte, wpe, B, T, C, vb, Vl, pos);
  }
  void embedding_backward(float* dwte, float* dwpe, const float* dout, const int* tokens, const int* pos, int B, int T,
                          int C, int vb, int Vl) override {
    cpu::embedding_backward(dwte, dwpe, dout, tokens, B, T, C, vb, Vl, pos);
  }
  void mask_losses(float* losses, const int* targets, int N) override { cpu::mask_losses(losses, targets, N); }
  void mask_rows(float* dlogits, const int* targets, int N, int Vl) override {
    cpu::mask_rows(dlogits, targets, N, Vl);
  }
  void swiglu_forward(float* out, const float* inp, int N, int F) override { cpu::swiglu_forward(out, inp, N, F); }
  void swiglu_backward(float* dinp, const float* inp, const float* dout, int N, int F) override {
    cpu::swiglu_backward(dinp, inp, dout, N, F);
  }
  void gelu_forward(float* out, const float* inp, size_t n) override { cpu::gelu_forward(out, inp, n); }
  void gelu_backward(float* dinp, const float* inp, const float* dout, size_t n) override {
    cpu::gelu_backward(dinp, inp, dout, n);
  }
  void residual_forward(float* out, const float* a, const float* b, size_t n) override {
    cpu::residual_forward(out, a, b, n);
  }
  void residual_backward(float* da, float* db, const float* dout, size_t n) override {
    cpu::residual_backward(da, db, dout, n);
  }
  void crossentropy_max_forward(float* row_max, const float* logits, int N, int Vl, int vb,
                                int V) override {
    cpu::crossentropy_max_forward(row_max, logits, N, Vl, vb, V);
  }
  void crossentropy_stats_forward(float* stats, const float* logits, const float* row_max,
                                  const int* targets, int N, int Vl, int vb, int V) override {
    cpu::crossentropy_stats_forward(stats, logits, row_max, targets, N, Vl, vb, V);
  }
  void crossentropy_forward(float* losses, const float* stats, const float* row_max, int N) override {
    cpu::crossentropy_forward(losses, stats, row_max, N);
  }
  void crossentropy_backward(float* dlogits, const float* logits, const float* row_max,
                             const float* stats, const int* targets, float dloss, int N, int Vl,
                             int vb, int V) override {
    cpu::crossentropy_backward(dlogits, logits, row_max, stats, targets, dloss, N, Vl, vb, V);
  }
  void mean_forward(float* mean, const float* x, int N) override { cpu::mean_forward(mean, x, N); }
  void scale_forward(float* x, float s, size_t n) override { cpu::scale_forward(x, s, n); }
  void sum_squares_forward(double* sq, const float* x, size_t n) override { cpu::sum_squares_forward(sq, x, n); }
  void adamw_update(float* params, float* m, float* v, const float* grads, size_t n, const AdamWStep& s) override {
    cpu::adamw_update(params, m, v, grads, n, s);
  }
};

}  // namespace

std::unique_ptr<Kernels> make_cpu_kernels() {
  ensure_fast_blas();
  return std::make_unique<CpuKernels>();
}

}  // namespace holmes::model::cpu
