#include "model/kernels.hpp"

#include <fmt/format.h>

#include <stdexcept>

namespace holmes::model {

void Kernels::unsupported(const char* op, DType p) const {
  throw std::logic_error(fmt::format("backend {} has no {} {} kernel", name(), dtype_name(p), op));
}

AttentionPlan Kernels::plan_attention(DType p, int B, int T, int /*C*/, int NH, int /*KVH*/) {
  if (!supports(p)) unsupported("attention", p);
  const size_t probs = static_cast<size_t>(B) * NH * T * T;
  return {probs, probs, "exact softmax, probabilities kept (B,NH,T,T)", true};
}

namespace {

// The default compositions, the same for fp32 and bf16 activations.
template <class A>
void unfused_matmul_gelu(Kernels& k, A* out, A* pre, const A* inp, const A* weight, const A* bias, int N, int C,
                         int OC) {
  k.matmul_forward(pre, inp, weight, bias, N, C, OC);
  k.gelu_forward(out, pre, static_cast<size_t>(N) * OC);
}

template <class A>
void unfused_matmul_dgelu(Kernels& k, A* dpre, float* dweight, float* dbias, const A* dout, const A* inp,
                          const A* weight, const A* pre, int N, int C, int OC) {
  k.matmul_backward(dpre, dweight, dbias, dout, inp, weight, N, C, OC);
  k.gelu_backward(dpre, pre, dpre, static_cast<size_t>(N) * C);
}

template <class A>
void two_pass_crossentropy(Kernels& k, float* row_max, float* stats, const A* logits, const int* targets, int N,
                           int Vl, int vocab_begin, int V) {
  k.crossentropy_max_forward(row_max, logits, N, Vl, vocab_begin, V);
  k.crossentropy_stats_forward(stats, logits, row_max, targets, N, Vl, vocab_begin, V);
}

}  // namespace

void Kernels::matmul_gelu_forward(float* out, float* pre, const float* inp, const float* weight,
                                  const float* bias, int N, int C, int OC) {
  unfused_matmul_gelu(*this, out, pre, inp, weight, bias, N, C, OC);
}

void Kernels::matmul_dgelu_backward(float* dpre, float* dweight, float* dbias, const float* dout,
                                    const float* inp, const float* weight, const float* pre, int N,
                                    int C, int OC) {
  unfused_matmul_dgelu(*this, dpre, dweight, dbias, dout, inp, weight, pre, N, C, OC);
}

void Kernels::crossentropy_fused_forward(float* row_max, float* stats, const float* logits,
                                         const int* targets, int N, int Vl, int vocab_begin, int V) {
  two_pass_crossentropy(*this, row_max, stats, logits, targets, N, Vl, vocab_begin, V);
}

// ---- bf16: absent unless a backend overrides them ----
constexpr DType kB = DType::kBf16;

void Kernels::convert(bf16*, const float*, size_t) { unsupported("convert", kB); }
void Kernels::convert(float*, const bf16*, size_t) { unsupported("convert", kB); }
void Kernels::embedding_forward(bf16*, const int*, const bf16*, const bf16*, int, int, int, int, int) {
  unsupported("embedding_forward", kB);
}
void Kernels::embedding_backward(float*, float*, const bf16*, const int*, int, int, int, int, int) {
  unsupported("embedding_backward", kB);
}
void Kernels::layernorm_forward(bf16*, float*, float*, const bf16*, const bf16*, const bf16*, int, int) {
  unsupported("layernorm_forward", kB);
}
void Kernels::layernorm_backward(bf16*, float*, float*, const bf16*, const bf16*, const bf16*,
                                 const float*, const float*, int, int) {
  unsupported("layernorm_backward", kB);
}
void Kernels::matmul_forward(bf16*, const bf16*, const bf16*, const bf16*, int, int, int) {
  unsupported("matmul_forward", kB);
}
void Kernels::matmul_backward(bf16*, float*, float*, const bf16*, const bf16*, const bf16*, int, int, int) {
  unsupported("matmul_backward", kB);
}
void Kernels::matmul_gelu_forward(bf16* out, bf16* pre, const bf16* inp, const bf16* weight,
                                  const bf16* bias, int N, int C, int OC) {
  unfused_matmul_gelu(*this, out, pre, inp, weight, bias, N, C, OC);
}
void Kernels::matmul_dgelu_backward(bf16* dpre, float* dweight, float* dbias, const bf16* dout,
                                    const bf16* inp, const bf16* weight, const bf16* pre, int N,
                                    int C, int OC) {
  unfused_matmul_dgelu(*this, dpre, dweight, dbias, dout, inp, weight, pre, N, C, OC);
}
void Kernels::attention_forward(bf16*, float*, const bf16*, int, int, int, int, int) {
  unsupported("attention_forward", kB);
}
void Kernels::attention_backward(bf16*, float*, const bf16*, const bf16*, const bf16*, const float*,
                                 int, int, int, int, int) {
  unsupported("attention_backward", kB);
}
void Kernels::rmsnorm_forward(bf16*, float*, const bf16*, const bf16*, int, int, float) {
  unsupported("rmsnorm_forward", kB);
}
void Kernels::rmsnorm_backward(bf16*, float*, const bf16*, const bf16*, const bf16*, const float*, int, int) {
  unsupported("rmsnorm_backward", kB);
}
void Kernels::rope_forward(bf16*, const bf16*, const float*, int, int, int, int, int) {
  unsupported("rope_forward", kB);
}
void Kernels::rope_backward(bf16*, const bf16*, const float*, int, int, int, int, int) {
  unsupported("rope_backward", kB);
}
void Kernels::swiglu_forward(bf16*, const bf16*, int, int) { unsupported("swiglu_forward", kB); }
void Kernels::swiglu_backward(bf16*, const bf16*, const bf16*, int, int) { unsupported("swiglu_backward", kB); }
void Kernels::gelu_forward(bf16*, const bf16*, size_t) { unsupported("gelu_forward", kB); }
void Kernels::gelu_backward(bf16*, const bf16*, const bf16*, size_t) { unsupported("gelu_backward", kB); }
void Kernels::residual_forward(bf16*, const bf16*, const bf16*, size_t) { unsupported("residual_forward", kB); }
void Kernels::residual_backward(bf16*, bf16*, const bf16*, size_t) { unsupported("residual_backward", kB); }
void Kernels::crossentropy_max_forward(float*, const bf16*, int, int, int, int) {
  unsupported("crossentropy_max_forward", kB);
}
void Kernels::crossentropy_stats_forward(float*, const bf16*, const float*, const int*, int, int, int, int) {
  unsupported("crossentropy_stats_forward", kB);
}
void Kernels::crossentropy_fused_forward(float* row_max, float* stats, const bf16* logits,
                                         const int* targets, int N, int Vl, int vocab_begin, int V) {
  two_pass_crossentropy(*this, row_max, stats, logits, targets, N, Vl, vocab_begin, V);
}
void Kernels::crossentropy_backward(bf16*, const bf16*, const float*, const float*, const int*, float,
                                    int, int, int, int) {
  unsupported("crossentropy_backward", kB);
}

// ---- document masking: without pos the plain ops; with pos, only backends that have them ----
namespace {

[[noreturn]] void no_document_op(const Kernels& k, const char* op) {
  throw std::logic_error(fmt::format("backend {} has no document-masked {} kernel", k.name(), op));
}

}  // namespace

AttentionPlan Kernels::plan_attention(DType p, int B, int T, int C, int NH, int KVH, bool /*document_mask*/) {
  return plan_attention(p, B, T, C, NH, KVH);
}
void Kernels::attention_forward(float* out, float* att, const float* qkv, const int* pos, int B, int T, int C, int NH,
                                int KVH) {
  if (pos) no_document_op(*this, "attention_forward");
  attention_forward(out, att, qkv, B, T, C, NH, KVH);
}
void Kernels::attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv, const float* out,
                                 const float* att, const int* pos, int B, int T, int C, int NH, int KVH) {
  if (pos) no_document_op(*this, "attention_backward");
  attention_backward(dqkv, scratch, dout, qkv, out, att, B, T, C, NH, KVH);
}
void Kernels::attention_forward(bf16* out, float* att, const bf16* qkv, const int* pos, int B, int T, int C, int NH,
                                int KVH) {
  if (pos) no_document_op(*this, "attention_forward");
  attention_forward(out, att, qkv, B, T, C, NH, KVH);
}
void Kernels::attention_backward(bf16* dqkv, float* scratch, const bf16* dout, const bf16* qkv, const bf16* out,
                                 const float* att, const int* pos, int B, int T, int C, int NH, int KVH) {
  if (pos) no_document_op(*this, "attention_backward");
  attention_backward(dqkv, scratch, dout, qkv, out, att, B, T, C, NH, KVH);
}
void Kernels::rope_forward(float* out, const float* inp, const float* cs, const int* pos, int B, int T, int H, int HS,
                           int stride) {
  if (pos) no_document_op(*this, "rope_forward");
  rope_forward(out, inp, cs, B, T, H, HS, stride);
}
void Kernels::rope_backward(float* dinp, const float* dout, const float* cs, const int* pos, int B, int T, int H,
                            int HS, int stride) {
  if (pos) no_document_op(*this, "rope_backward");
  rope_backward(dinp, dout, cs, B, T, H, HS, stride);
}
void Kernels::rope_forward(bf16* out, const bf16* inp, const float* cs, const int* pos, int B, int T, int H, int HS,
                           int stride) {
  if (pos) no_document_op(*this, "rope_forward");
  rope_forward(out, inp, cs, B, T, H, HS, stride);
}
void Kernels::rope_backward(bf16* dinp, const bf16* dout, const float* cs, const int* pos, int B, int T, int H,
                            int HS, int stride) {
  if (pos) no_document_op(*this, "rope_backward");
  rope_backward(dinp, dout, cs, B, T, H, HS, stride);
}
void Kernels::embedding_forward(float* out, const int* tokens, const int* pos, const float* wte, const float* wpe,
                                int B, int T, int C, int vb, int Vl) {
  if (pos && wpe) no_document_op(*this, "embedding_forward");
  embedding_forward(out, tokens, wte, wpe, B, T, C, vb, Vl);
}
void Kernels::embedding_backward(float* dwte, float* dwpe, const float* dout, const int* tokens, const int* pos,
                                 int B, int T, int C, int vb, int Vl) {
  if (pos && dwpe) no_document_op(*this, "embedding_backward");
  embedding_backward(dwte, dwpe, dout, tokens, B, T, C, vb, Vl);
}
void Kernels::embedding_forward(bf16* out, const int* tokens, const int* pos, const bf16* wte, const bf16* wpe, int B,
                                int T, int C, int vb, int Vl) {
  if (pos && wpe) no_document_op(*this, "embedding_forward");
  embedding_forward(out, tokens, wte, wpe, B, T, C, vb, Vl);
}
void Kernels::embedding_backward(float* dwte, float* dwpe, const bf16* dout, const int* tokens, const int* pos, int B,
                                 int T, int C, int vb, int Vl) {
  if (pos && dwpe) no_document_op(*this, "embedding_backward");
  embedding_backward(dwte, dwpe, dout, tokens, B, T, C, vb, Vl);
}
void Kernels::mask_losses(float*, const int*, int) { no_document_op(*this, "mask_losses"); }
void Kernels::mask_rows(float*, const int*, int, int) { no_document_op(*this, "mask_rows"); }
void Kernels::mask_rows(bf16*, const int*, int, int) { no_document_op(*this, "mask_rows"); }

}  // namespace holmes::model
