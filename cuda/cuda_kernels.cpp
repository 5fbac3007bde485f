#include "cuda/cuda_kernels.hpp"

#include <cstdlib>
#include <string_view>

#include "cuda/gemm.hpp"
#include "cuda/pointwise.hpp"
#include "cuda/layernorm.hpp"
#include "cuda/matmul.hpp"
#include "cuda/attention.hpp"
#include "cuda/rmsnorm.hpp"
#include "cuda/loss_mask.hpp"
#include "cuda/rope.hpp"
#include "cuda/swiglu.hpp"
#include "cuda/vocab.hpp"
#include "cuda/optimizer.hpp"

namespace holmes::cuda {

namespace {

bool gelu_fusion_enabled() {
  const char* v = std::getenv("HOLMES_GELU_FUSION");
  return v == nullptr || std::string_view(v) != "0";
}

// model::bf16 (host storage type) and __nv_bfloat16 (device type) are the same 2 bytes.
static_assert(sizeof(model::bf16) == sizeof(bf16));
bf16* dev(model::bf16* p) { return reinterpret_cast<bf16*>(p); }
const bf16* dev(const model::bf16* p) { return reinterpret_cast<const bf16*>(p); }

class CudaKernels final : public model::Kernels {
 public:
  explicit CudaKernels(cudaStream_t stream) : stream_(stream), attention_(stream) {}
  const char* name() const override { return "cuda"; }
  bool supports(DType p) const override { return p == DType::kF32 || p == DType::kBf16; }

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
  void matmul_gelu_forward(float* out, float* pre, const float* inp, const float* w, const float* b, int N, int C,
                           int OC) override {
    cuda::matmul_gelu_forward(gemm_, out, pre, inp, w, b, N, C, OC, DType::kF32, fuse_gelu_, stream_);
  }
  void matmul_dgelu_backward(float* dpre, float* dw, float* db, const float* dout, const float* inp,
                             const float* w, const float* pre, int N, int C, int OC) override {
    cuda::matmul_dgelu_backward(gemm_, dpre, dw, db, dout, inp, w, pre, N, C, OC, DType::kF32, DType::kF32,
                                fuse_gelu_, stream_);
  }
  model::AttentionPlan plan_attention(DType p, int B, int T, int C, int NH, int KVH) override {
    return attention_.plan(p, B, T, C, NH, KVH);
  }
  // fp32 attention before any plan (op-level callers) is the exact method.
  bool fp32_planned() const { return attention_.method(DType::kF32) != Attention::Method::kAuto; }
  void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C, int NH,
                         int KVH) override {
    if (fp32_planned())
      attention_.forward(out, att, qkv, B, T, C, NH, KVH);
    else
      cuda::attention_forward(out, att, qkv, B, T, C, NH, KVH, stream_);
  }
  void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv,
                          const float* out, const float* att, int B, int T, int C, int NH,
                          int KVH) override {
    if (fp32_planned())
      attention_.backward(dqkv, scratch, dout, qkv, out, att, B, T, C, NH, KVH);
    else
      cuda::attention_backward(dqkv, scratch, dout, qkv, att, B, T, C, NH, KVH, stream_);
  }
  // ---- document masking (kernels.hpp): the ops above with positions ----
  model::AttentionPlan plan_attention(DType p, int B, int T, int C, int NH, int KVH,
                                      bool document_mask) override {
    return attention_.plan(p, B, T, C, NH, KVH, document_mask);
  }
  void attention_forward(float* out, float* att, const float* qkv, const int* pos, int B, int T, int C, int NH,
                         int KVH) override {
    if (fp32_planned())
      attention_.forward(out, att, qkv, B, T, C, NH, KVH, pos);
    else
      cuda::attention_forward(out, att, qkv, pos, B, T, C, NH, KVH, stream_);
  }
  // The probabilities kept are 0 outside each document's block: the backward is the same.
  void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv, const float* out,
                          const float* att, const int* pos, int B, int T, int C, int NH, int KVH) override {
    if (fp32_planned())
      attention_.backward(dqkv, scratch, dout, qkv, out, att, B, T, C, NH, KVH, pos);
    else
      cuda::attention_backward(dqkv, scratch, dout, qkv, att, B, T, C, NH, KVH, stream_);
  }
  void attention_forward(model::bf16* out, float* att, const model::bf16* qkv, const int* pos, int B, int T, int C,
                         int NH, int KVH) override {
    attention_.forward(dev(out), att, dev(qkv), B, T, C, NH, KVH, pos);
  }
  void attention_backward(model::bf16* dqkv, float* scratch, const model::bf16* dout, const model::bf16* qkv,
                          const model::bf16* out, const float* att, const int* pos, int B, int T, int C, int NH,
                          int KVH) override {
    attention_.backward(dev(dqkv), scratch, dev(dout), dev(qkv), dev(out), att, B, T, C, NH, KVH, pos);
  }
  void rope_forward(float* out, const float* inp, const float* cs, const int* pos, int B, int T, int H, int HS,
                    int stride) override {
    cuda::rope_forward(out, inp, cs, pos, B, T, H, HS, stride, stream_);
  }
  void rope_backward(float* dinp, const float* dout, const float* cs, const int* pos, int B, int T, int H, int HS,
                     int stride) override {
    cuda::rope_backward(dinp, dout, cs, pos, B, T, H, HS, stride, stream_);
  }
  void rope_forward(model::bf16* out, const model::bf16* inp, const float* cs, const int* pos, int B, int T, int H,
                    int HS, int stride) override {
    cuda::rope_forward(dev(out), dev(inp), cs, pos, B, T, H, HS, stride, stream_);
  }
  void rope_backward(model::bf16* dinp, const model::bf16* dout, const float* cs, const int* pos, int B, int T,
                     int H, int HS, int stride) override {
    cuda::rope_backward(dev(dinp), dev(dout), cs, pos, B, T, H, HS, stride, stream_);
  }
  void embedding_forward(float* out, const int* tokens, const int* pos, const float* wte, const float* wpe, int B,
                         int T, int C, int vb, int Vl) override {
    cuda::embedding_forward(out, tokens, pos, wte, wpe, B, T, C, vb, Vl, stream_);
  }
  void embedding_backward(float* dwte, float* dwpe, const float* dout, const int* tokens, const int* pos, int B, int T,
                          int C, int vb, int Vl) override {
    cuda::embedding_backward(dwte, dwpe, dout, tokens, pos, B, T, C, vb, Vl, stream_);
  }
  void embedding_forward(model::bf16* out, const int* tokens, const int* pos, const model::bf16* wte,
                         const model::bf16* wpe, int B, int T, int C, int vb, int Vl) override {
    cuda::embedding_forward(dev(out), tokens, pos, dev(wte), dev(wpe), B, T, C, vb, Vl, stream_);
  }
  void embedding_backward(float* dwte, float* dwpe, const model::bf16* dout, const int* tokens, const int* pos,
                          int B, int T, int C, int vb, int Vl) override {
    cuda::embedding_backward(dwte, dwpe, dev(dout), tokens, pos, B, T, C, vb, Vl, stream_);
  }
  void mask_losses(float* losses, const int* targets, int N) override {
    cuda::mask_losses(losses, targets, N, stream_);
  }
  void mask_rows(float* dlogits, const int* targets, int N, int Vl) override {
    cuda::mask_rows(dlogits, targets, N, Vl, stream_);
  }
  void mask_rows(model::bf16* dlogits, const int* targets, int N, int Vl) override {
    cuda::mask_rows(dev(dlogits), targets, N, Vl, stream_);
  }

  void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* w, int N, int C,
                       float eps) override {
    cuda::rmsnorm_forward(out, rstd, inp, w, N, C, eps, stream_);
  }
  void rmsnorm_backward(float* dinp, float* dw, const float* dout, const float* inp, const float* w,
                        const float* rstd, int N, int C) override {
    cuda::rmsnorm_backward(dinp, dw, dout, inp, w, rstd, N, C, stream_);
  }
  void rope_forward(float* out, const float* inp, const float* cs, int B, int T, int H, int HS,
                    int stride) override {
    cuda::rope_forward(out, inp, cs, B, T, H, HS, stride, stream_);
  }
  void rope_backward(float* dinp, const float* dout, const float* cs, int B, int T, int H, int HS,
                     int stride) override {
    cuda::rope_backward(dinp, dout, cs, B, T, H, HS, stride, stream_);
  }
  void swiglu_forward(float* out, const float* inp, int N, int F) override {
    cuda::swiglu_forward(out, inp, N, F, stream_);
  }
  void swiglu_backward(float* dinp, const float* inp, const float* dout, int N, int F) override {
    cuda::swiglu_backward(dinp, inp, dout, N, F, stream_);
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
  void crossentropy_fused_forward(float* row_max, float* stats, const float* logits, const int* targets, int N,
                                  int Vl, int vb, int V) override {
    cuda::crossentropy_fused_forward(row_max, stats, logits, targets, N, Vl, vb, V, stream_);
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

  // ---- bf16 activations, fp32 gradients ----
  void convert(model::bf16* out, const float* inp, size_t n) override { cuda::convert(dev(out), inp, n, stream_); }
  void convert(float* out, const model::bf16* inp, size_t n) override { cuda::convert(out, dev(inp), n, stream_); }
  void matmul_forward(model::bf16* out, const model::bf16* inp, const model::bf16* w, const model::bf16* b, int N,
                      int C, int OC) override {
    cuda::matmul_forward(gemm_, out, inp, w, b, N, C, OC, DType::kBf16, stream_);
  }
  void matmul_backward(model::bf16* dinp, float* dw, float* db, const model::bf16* dout, const model::bf16* inp,
                       const model::bf16* w, int N, int C, int OC) override {
    cuda::matmul_backward(gemm_, dinp, dw, db, dout, inp, w, N, C, OC, DType::kBf16, DType::kF32, stream_);
  }
  void matmul_gelu_forward(model::bf16* out, model::bf16* pre, const model::bf16* inp, const model::bf16* w,
                           const model::bf16* b, int N, int C, int OC) override {
    cuda::matmul_gelu_forward(gemm_, out, pre, inp, w, b, N, C, OC, DType::kBf16, fuse_gelu_, stream_);
  }
  void matmul_dgelu_backward(model::bf16* dpre, float* dw, float* db, const model::bf16* dout,
                             const model::bf16* inp, const model::bf16* w, const model::bf16* pre, int N, int C,
                             int OC) override {
    cuda::matmul_dgelu_backward(gemm_, dpre, dw, db, dout, inp, w, pre, N, C, OC, DType::kBf16, DType::kF32,
                                fuse_gelu_, stream_);
  }
  void attention_forward(model::bf16* out, float* att, const model::bf16* qkv, int B, int T, int C, int NH,
                         int KVH) override {
    attention_.forward(dev(out), att, dev(qkv), B, T, C, NH, KVH);
  }
  void attention_backward(model::bf16* dqkv, float* scratch, const model::bf16* dout, const model::bf16* qkv,
                          const model::bf16* out, const float* att, int B, int T, int C, int NH,
                          int KVH) override {
    attention_.backward(dev(dqkv), scratch, dev(dout), dev(qkv), dev(out), att, B, T, C, NH, KVH);
  }
  void rmsnorm_forward(model::bf16* out, float* rstd, const model::bf16* inp, const model::bf16* w, int N, int C,
                       float eps) override {
    cuda::rmsnorm_forward(dev(out), rstd, dev(inp), dev(w), N, C, eps, stream_);
  }
  void rmsnorm_backward(model::bf16* dinp, float* dw, const model::bf16* dout, const model::bf16* inp,
                        const model::bf16* w, const float* rstd, int N, int C) override {
    cuda::rmsnorm_backward(dev(dinp), dw, dev(dout), dev(inp), dev(w), rstd, N, C, stream_);
  }
  void rope_forward(model::bf16* out, const model::bf16* inp, const float* cs, int B, int T, int H, int HS,
                    int stride) override {
    cuda::rope_forward(dev(out), dev(inp), cs, B, T, H, HS, stride, stream_);
  }
  void rope_backward(model::bf16* dinp, const model::bf16* dout, const float* cs, int B, int T, int H, int HS,
                     int stride) override {
    cuda::rope_backward(dev(dinp), dev(dout), cs, B, T, H, HS, stride, stream_);
  }
  void swiglu_forward(model::bf16* out, const model::bf16* inp, int N, int F) override {
    cuda::swiglu_forward(dev(out), dev(inp), N, F, stream_);
  }
  void swiglu_backward(model::bf16* dinp, const model::bf16* inp, const model::bf16* dout, int N, int F) override {
    cuda::swiglu_backward(dev(dinp), dev(inp), dev(dout), N, F, stream_);
  }
  void embedding_forward(model::bf16* out, const int* tokens, const model::bf16* wte, const model::bf16* wpe, int B,
                         int T, int C, int vb, int Vl) override {
    cuda::embedding_forward(dev(out), tokens, dev(wte), dev(wpe), B, T, C, vb, Vl, stream_);
  }
  void embedding_backward(float* dwte, float* dwpe, const model::bf16* dout, const int* tokens, int B, int T, int C,
                          int vb, int Vl) override {
    cuda::embedding_backward(dwte, dwpe, dev(dout), tokens, B, T, C, vb, Vl, stream_);
  }
  void layernorm_forward(model::bf16* out, float* mean, float* rstd, const model::bf16* inp, const model::bf16* w,
                         const model::bf16* b, int N, int C) override {
    cuda::layernorm_forward(dev(out), mean, rstd, dev(inp), dev(w), dev(b), N, C, stream_);
  }
  void layernorm_backward(model::bf16* dinp, float* dw, float* db, const model::bf16* dout, const model::bf16* inp,
                          const model::bf16* w, const float* mean, const float* rstd, int N, int C) override {
    cuda::layernorm_backward(dev(dinp), dw, db, dev(dout), dev(inp), dev(w), mean, rstd, N, C, stream_);
  }
  void crossentropy_max_forward(float* row_max, const model::bf16* logits, int N, int Vl, int vb, int V) override {
    cuda::crossentropy_max_forward(row_max, dev(logits), N, Vl, vb, V, stream_);
  }
  void crossentropy_stats_forward(float* stats, const model::bf16* logits, const float* row_max, const int* targets,
                                  int N, int Vl, int vb, int V) override {
    cuda::crossentropy_stats_forward(stats, dev(logits), row_max, targets, N, Vl, vb, V, stream_);
  }
  void crossentropy_fused_forward(float* row_max, float* stats, const model::bf16* logits, const int* targets, int N,
                                  int Vl, int vb, int V) override {
    cuda::crossentropy_fused_forward(row_max, stats, dev(logits), targets, N, Vl, vb, V, stream_);
  }
  void crossentropy_backward(model::bf16* dlogits, const model::bf16* logits, const float* row_max,
                             const float* stats, const int* targets, float dloss, int N, int Vl, int vb,
                             int V) override {
    cuda::crossentropy_backward(dev(dlogits), dev(logits), row_max, stats, targets, dloss, N, Vl, vb, V, stream_);
  }
  void gelu_forward(model::bf16* out, const model::bf16* inp, size_t n) override {
    cuda::gelu_forward(dev(out), dev(inp), n, stream_);
  }
  void gelu_backward(model::bf16* dinp, const model::bf16* inp, const model::bf16* dout, size_t n) override {
    cuda::gelu_backward(dev(dinp), dev(inp), dev(dout), n, stream_);
  }
  void residual_forward(model::bf16* out, const model::bf16* a, const model::bf16* b, size_t n) override {
    cuda::residual_forward(dev(out), dev(a), dev(b), n, stream_);
  }
  void residual_backward(model::bf16* da, model::bf16* db, const model::bf16* dout, size_t n) override {
    cuda::residual_backward(dev(da), dev(db), dev(dout), n, stream_);
  }

 private:
  cudaStream_t stream_;
  GemmRunner gemm_;
  Attention attention_;
  // GELU fused into the GEMMs as cuBLASLt epilogues where cuBLASLt offers them;
  // HOLMES_GELU_FUSION=0 turns it off (separate kernels), e.g. to compare.
  bool fuse_gelu_ = gelu_fusion_enabled();
};

}  // namespace

std::unique_ptr<model::Kernels> make_cuda_kernels(cudaStream_t stream) {
  return std::make_unique<CudaKernels>(stream);
}

}  // namespace holmes::cuda
