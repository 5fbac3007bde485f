// The op set of the decoder models (GPT-2 and Llama), implemented once per backend with the same names and argument
// order (model/cpu/ for fp32 on the host, cuda/ for the GPU). Conventions:
//   - op pairs <op>_forward / <op>_backward; gradients prefixed d;
//   - arguments in the order outputs, inputs, sizes;
//   - all pointers address memory of the backend's device; "accumulates" means +=,
//     "writes" means =. Shapes use the legend of model/gpt_config.hpp.
//   - Linear weights are (OC, C) as in torch.nn.Linear: out = inp @ weight^T + bias.
//   - Precision: every op exists for fp32 activations; the bf16 overloads (second half of
//     the class) take bf16 activations and a bf16 copy of the weights, and still write fp32
//     weight gradients, LayerNorm statistics, losses and softmax statistics, accumulating in
//     fp32 throughout. A backend without bf16 kernels (the CPU) inherits the defaults, which
//     throw std::logic_error; supports() says which precisions a backend has. The FP8
//     types (DType::kE4M3, kE5M2) are GEMM operand types only: supports(kE4M3) says the
//     backend has the FP8 linear-layer ops at the end of the class.
#pragma once

#include <cstddef>
#include <string>

#include "common/dtype.hpp"
#include "model/bf16.hpp"
#include "model/fp8_recipe.hpp"

namespace holmes::model {

// The scalars of one AdamW step (computed once per step on the host; engine/parallel/adamw.hpp
// has the formula and the bias corrections).
struct AdamWStep {
  float beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f;
  float decay_factor = 1.0f;  // 1 - lr * weight_decay where the run decays, else 1
  float step_size = 0.0f;     // lr / (1 - beta1^t)
  float inv_sqrt_bc2 = 1.0f;  // 1 / sqrt(1 - beta2^t)
  float grad_scale = 1.0f;    // gradient clipping factor
};

// How a backend computes attention for one shape and precision (Kernels::plan_attention):
// the floats of the state a forward keeps for its backward (`att`), of the backward's
// workspace (`scratch`), and a one-line description for the log.
struct AttentionPlan {
  size_t state_floats = 0;
  size_t scratch_floats = 0;
  std::string method;
  // The state is the softmax probabilities (B,NH,T,T), not a fused method's row statistics:
  // selective recomputation (model/gpt.hpp, Recompute) drops it and replays the forward.
  bool probabilities = true;
};

class Kernels {
 public:
  virtual ~Kernels() = default;
  virtual const char* name() const = 0;
  // Whether the ops run with activations (and the weights copy) of type p: fp32 always, bf16
  // where the backend has the overloads below.
  virtual bool supports(DType p) const { return p == DType::kF32; }

  // Chooses the attention method for micro-batches up to (B, T) of this shard (C = NHl * HS
  // query channels, NH = NHl query heads, KVH = KVHl key/value heads) in precision p; later
  // calls with smaller B or T use the same method. The default is the exact form below: the
  // probabilities (B,NH,T,T) kept, the same again as workspace. Throws UserError when no
  // method exists for the shape.
  virtual AttentionPlan plan_attention(DType p, int B, int T, int C, int NH, int KVH);

  // out (B,T,C) writes wte[tok - vocab_begin] for tokens in [vocab_begin, vocab_begin+Vl),
  // 0 for other tokens (another vocabulary shard holds them), plus wpe[t] when wpe != nullptr.
  // wte (Vl,C), wpe (max_seq_len,C), tokens (B,T).
  virtual void embedding_forward(float* out, const int* tokens, const float* wte, const float* wpe,
                                 int B, int T, int C, int vocab_begin, int Vl) = 0;
  // dwte, dwpe accumulate (dwpe may be nullptr); dout (B,T,C).
  virtual void embedding_backward(float* dwte, float* dwpe, const float* dout, const int* tokens,
                                  int B, int T, int C, int vocab_begin, int Vl) = 0;

  // out (N,C) writes, mean/rstd (N) write; eps 1e-5 as in GPT-2.
  virtual void layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                                 const float* weight, const float* bias, int N, int C) = 0;
  // dinp (N,C) ACCUMULATES (it is the residual stream's gradient); dweight, dbias accumulate.
  virtual void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                                  const float* inp, const float* weight, const float* mean,
                                  const float* rstd, int N, int C) = 0;

  // out (N,OC) writes inp (N,C) @ weight (OC,C)^T + bias (OC; nullptr = none).
  virtual void matmul_forward(float* out, const float* inp, const float* weight, const float* bias,
                              int N, int C, int OC) = 0;
  // dinp (N,C) writes (nullptr = skip); dweight (OC,C) and dbias (OC; nullptr = none) accumulate
  // (dweight nullptr = skip both: the zero-bubble split computes input and weight gradients
  // in two calls, each the same GEMM as in the one call).
  virtual void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                               const float* inp, const float* weight, int N, int C, int OC) = 0;
  // The MLP's first linear layer with its GELU: pre (N,OC) writes inp @ weight^T + bias,
  // out (N,OC) writes gelu(pre). A backend may fuse the two (cuBLASLt epilogue); the default
  // is matmul_forward then gelu_forward.
  virtual void matmul_gelu_forward(float* out, float* pre, const float* inp, const float* weight,
                                   const float* bias, int N, int C, int OC);
  // The backward of a linear layer whose input is gelu(pre): dpre (N,C) writes
  // gelu'(pre) * (dout @ weight), dweight and dbias as in matmul_backward (nullptr = skip),
  // inp = gelu(pre).
  // Default: matmul_backward then gelu_backward.
  virtual void matmul_dgelu_backward(float* dpre, float* dweight, float* dbias, const float* dout,
                                     const float* inp, const float* weight, const float* pre,
                                     int N, int C, int OC);

  // Causal self-attention with grouped-query heads: NH query heads of size HS = C/NH share
  // KVH key/value heads (KVH divides NH; query head h reads key/value head h / (NH/KVH); GPT-2
  // has KVH = NH), scaled by 1/sqrt(HS). qkv (B,T,(NH+2KVH)*HS) holds, per row, [q (NH heads)
  // | k (KVH heads) | v (KVH heads)], each head HS consecutive channels (GPT-2: [q | k | v]
  // blocks of C channels). out (B,T,C) writes; att (plan_attention().state_floats) writes
  // what the backward needs: for the default method the softmax probabilities (B,NH,T,T), 0
  // above the diagonal. Here C, NH and KVH are this shard's NHl*HS, NHl and KVHl.
  virtual void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C,
                                 int NH, int KVH) = 0;
  // dqkv (B,T,(NH+2KVH)*HS) writes; scratch (plan_attention().scratch_floats) is workspace;
  // dout (B,T,C); out and att are what the forward of this micro-batch wrote.
  virtual void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv,
                                  const float* out, const float* att, int B, int T, int C,
                                  int NH, int KVH) = 0;

  // ---- Llama ----
  // RMSNorm: out (N,C) writes inp * rstd * weight, rstd (N) writes 1 / sqrt(mean(inp^2) + eps).
  virtual void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, int N,
                               int C, float eps) = 0;
  // dinp (N,C) ACCUMULATES (the residual stream's gradient); dweight (C) accumulates.
  virtual void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp,
                                const float* weight, const float* rstd, int N, int C) = 0;
  // Rotary position embedding, Hugging Face's rotate-half convention: the first H heads of
  // HS channels (HS even) of every row of inp (B,T rows, `stride` elements apart) turn by
  // position t = row % T: for i < HS/2, with c = cos_sin[t][i], s = cos_sin[t][HS/2 + i],
  //   out[i] = x[i] c - x[i + HS/2] s,  out[i + HS/2] = x[i + HS/2] c + x[i] s.
  // cos_sin (T', HS) fp32, T' >= T, holds cos(t theta^(-2i/HS)) then sin(...) per position.
  // Channels of a row past H*HS are not touched; out may alias inp (the model rotates q and
  // k in place inside qkv: H = NHl + KVHl heads, stride = (NHl + 2 KVHl) HS).
  virtual void rope_forward(float* out, const float* inp, const float* cos_sin, int B, int T, int H,
                            int HS, int stride) = 0;
  // dinp writes the inverse rotation of dout (same layout); dinp may alias dout.
  virtual void rope_backward(float* dinp, const float* dout, const float* cos_sin, int B, int T, int H,
                             int HS, int stride) = 0;
  // SwiGLU: inp (N,2F) holds [gate (F) | up (F)] per row; out (N,F) writes silu(gate) * up,
  // silu(g) = g / (1 + exp(-g)).
  virtual void swiglu_forward(float* out, const float* inp, int N, int F) = 0;
  // dinp (N,2F) writes [dgate | dup] given dout (N,F).
  virtual void swiglu_backward(float* dinp, const float* inp, const float* dout, int N, int F) = 0;

  // GELU, tanh approximation (GPT-2): out (n) writes.
  virtual void gelu_forward(float* out, const float* inp, size_t n) = 0;
  // dinp (n) writes; dinp may alias dout.
  virtual void gelu_backward(float* dinp, const float* inp, const float* dout, size_t n) = 0;

  // out (n) writes a + b; out may alias a.
  virtual void residual_forward(float* out, const float* a, const float* b, size_t n) = 0;
  // da, db (n) accumulate dout (either may be nullptr).
  virtual void residual_backward(float* da, float* db, const float* dout, size_t n) = 0;

  // Vocabulary-parallel cross-entropy in three passes with a TP all-reduce between them:
  //   1. row_max (N) writes the max over this shard's valid logits (global ids < V);
  //      all-reduce MAX over TP.
  //   2. stats (N,2) writes [sum_v exp(logit - row_max), logit of the target if this shard
  //      holds it else 0]; all-reduce SUM over TP.
  //   3. losses (N) writes log(stats[0]) + row_max - stats[1].
  // logits (N,Vl) are this shard's columns [vocab_begin, vocab_begin+Vl); columns with a
  // global id >= V are padding and never count.
  virtual void crossentropy_max_forward(float* row_max, const float* logits, int N, int Vl,
                                        int vocab_begin, int V) = 0;
  virtual void crossentropy_stats_forward(float* stats, const float* logits, const float* row_max,
                                          const int* targets, int N, int Vl, int vocab_begin,
                                          int V) = 0;
  virtual void crossentropy_forward(float* losses, const float* stats, const float* row_max,
                                    int N) = 0;
  // dlogits (N,Vl) writes dloss * (softmax - onehot(target)), 0 in padded columns. dlogits
  // may alias logits (done in place to save memory).
  virtual void crossentropy_backward(float* dlogits, const float* logits, const float* row_max,
                                     const float* stats, const int* targets, float dloss, int N,
                                     int Vl, int vocab_begin, int V) = 0;
  // Passes 1 and 2 in one read of the logits (online softmax), for an unsharded vocabulary
  // (TP = 1, nothing to all-reduce between them): row_max and stats write what the two
  // passes would. Default: the two passes.
  virtual void crossentropy_fused_forward(float* row_max, float* stats, const float* logits,
                                          const int* targets, int N, int Vl, int vocab_begin, int V);

  // mean (1) writes the mean of x (N), summed in double (a micro-batch's loss from losses).
  virtual void mean_forward(float* mean, const float* x, int N) = 0;
  // x (n) *= s (a data-parallel sum into a mean).
  virtual void scale_forward(float* x, float s, size_t n) = 0;

  // ---- optimizer ----
  // sq (1, double) ACCUMULATES the sum of squares of x (n), in double (a shard's share of the
  // global gradient norm).
  virtual void sum_squares_forward(double* sq, const float* x, size_t n) = 0;
  // One AdamW step on a run of n elements sharing its weight decay: g = grads * grad_scale;
  // m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; params = params * decay_factor
  // - step_size * m / (sqrt(v) * inv_sqrt_bc2 + eps). params, m, v (n) update in place.
  virtual void adamw_update(float* params, float* m, float* v, const float* grads, size_t n,
                            const AdamWStep& s) = 0;

  // ---- document masking (data.document_mask, data.mask_document_start; docs/training.md) ----
  // pos (B,T) int32 in backend memory: each token's position in its document, 0 at a
  // document's first token and at a sequence's first token, so the document of token t
  // starts at t - pos[b,t]. pos == nullptr means one document per sequence: the op above.
  // The defaults forward pos == nullptr to the op above and throw std::logic_error otherwise.
  //
  // plan_attention for a model whose micro-batches may carry pos: the method must mask.
  virtual AttentionPlan plan_attention(DType p, int B, int T, int C, int NH, int KVH, bool document_mask);
  // Attention block-causal over the documents of each sequence: query t attends keys
  // t - pos[b,t] .. t; a method that keeps probabilities keeps 0 outside that block. The
  // backward gets the forward's pos: a method that recomputes the probabilities (cuDNN's fused
  // attention) masks them again with it.
  virtual void attention_forward(float* out, float* att, const float* qkv, const int* pos, int B, int T, int C,
                                 int NH, int KVH);
  virtual void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv, const float* out,
                                  const float* att, const int* pos, int B, int T, int C, int NH, int KVH);
  virtual void attention_forward(bf16* out, float* att, const bf16* qkv, const int* pos, int B, int T, int C, int NH,
                                 int KVH);
  virtual void attention_backward(bf16* dqkv, float* scratch, const bf16* dout, const bf16* qkv, const bf16* out,
                                  const float* att, const int* pos, int B, int T, int C, int NH, int KVH);
  // Rotary embedding turning the row of token (b, t) by pos[b,t] instead of t.
  virtual void rope_forward(float* out, const float* inp, const float* cos_sin, const int* pos, int B, int T, int H,
                            int HS, int stride);
  virtual void rope_backward(float* dinp, const float* dout, const float* cos_sin, const int* pos, int B, int T,
                             int H, int HS, int stride);
  virtual void rope_forward(bf16* out, const bf16* inp, const float* cos_sin, const int* pos, int B, int T, int H,
                            int HS, int stride);
  virtual void rope_backward(bf16* dinp, const bf16* dout, const float* cos_sin, const int* pos, int B, int T, int H,
                             int HS, int stride);
  // Learned positions: wpe row pos[b,t] instead of t (dwpe accumulates into the same rows).
  virtual void embedding_forward(float* out, const int* tokens, const int* pos, const float* wte, const float* wpe,
                                 int B, int T, int C, int vocab_begin, int Vl);
  virtual void embedding_backward(float* dwte, float* dwpe, const float* dout, const int* tokens, const int* pos,
                                  int B, int T, int C, int vocab_begin, int Vl);
  virtual void embedding_forward(bf16* out, const int* tokens, const int* pos, const bf16* wte, const bf16* wpe,
                                 int B, int T, int C, int vocab_begin, int Vl);
  virtual void embedding_backward(float* dwte, float* dwpe, const bf16* dout, const int* tokens, const int* pos,
                                  int B, int T, int C, int vocab_begin, int Vl);
  // Targets that are not trained on are -1 (the cross-entropy ops hold no shard for them):
  // losses (N) writes 0 where targets[n] < 0; the rows of dlogits (N,Vl) whose target is < 0
  // write 0. Only rows with a negative target are touched. Default: std::logic_error.
  virtual void mask_losses(float* losses, const int* targets, int N);
  virtual void mask_rows(float* dlogits, const int* targets, int N, int Vl);
  virtual void mask_rows(bf16* dlogits, const int* targets, int N, int Vl);

  // ---- bf16 activations (same contracts as the fp32 ops above) ----
  // out (n) writes the conversion of inp (n): fp32 -> bf16 rounds to nearest even.
  virtual void convert(bf16* out, const float* inp, size_t n);
  virtual void convert(float* out, const bf16* inp, size_t n);
  virtual void embedding_forward(bf16* out, const int* tokens, const bf16* wte, const bf16* wpe,
                                 int B, int T, int C, int vocab_begin, int Vl);
  virtual void embedding_backward(float* dwte, float* dwpe, const bf16* dout, const int* tokens,
                                  int B, int T, int C, int vocab_begin, int Vl);
  virtual void layernorm_forward(bf16* out, float* mean, float* rstd, const bf16* inp,
                                 const bf16* weight, const bf16* bias, int N, int C);
  virtual void layernorm_backward(bf16* dinp, float* dweight, float* dbias, const bf16* dout,
                                  const bf16* inp, const bf16* weight, const float* mean,
                                  const float* rstd, int N, int C);
  virtual void matmul_forward(bf16* out, const bf16* inp, const bf16* weight, const bf16* bias,
                              int N, int C, int OC);
  virtual void matmul_backward(bf16* dinp, float* dweight, float* dbias, const bf16* dout,
                               const bf16* inp, const bf16* weight, int N, int C, int OC);
  virtual void matmul_gelu_forward(bf16* out, bf16* pre, const bf16* inp, const bf16* weight,
                                   const bf16* bias, int N, int C, int OC);
  virtual void matmul_dgelu_backward(bf16* dpre, float* dweight, float* dbias, const bf16* dout,
                                     const bf16* inp, const bf16* weight, const bf16* pre, int N,
                                     int C, int OC);
  virtual void attention_forward(bf16* out, float* att, const bf16* qkv, int B, int T, int C,
                                 int NH, int KVH);
  virtual void attention_backward(bf16* dqkv, float* scratch, const bf16* dout, const bf16* qkv,
                                  const bf16* out, const float* att, int B, int T, int C, int NH,
                                  int KVH);
  // Llama ops: bf16 activations and weights, fp32 rstd, weight gradients and rotary table.
  virtual void rmsnorm_forward(bf16* out, float* rstd, const bf16* inp, const bf16* weight, int N,
                               int C, float eps);
  virtual void rmsnorm_backward(bf16* dinp, float* dweight, const bf16* dout, const bf16* inp,
                                const bf16* weight, const float* rstd, int N, int C);
  virtual void rope_forward(bf16* out, const bf16* inp, const float* cos_sin, int B, int T, int H,
                            int HS, int stride);
  virtual void rope_backward(bf16* dinp, const bf16* dout, const float* cos_sin, int B, int T, int H,
                             int HS, int stride);
  virtual void swiglu_forward(bf16* out, const bf16* inp, int N, int F);
  virtual void swiglu_backward(bf16* dinp, const bf16* inp, const bf16* dout, int N, int F);
  virtual void gelu_forward(bf16* out, const bf16* inp, size_t n);
  virtual void gelu_backward(bf16* dinp, const bf16* inp, const bf16* dout, size_t n);
  virtual void residual_forward(bf16* out, const bf16* a, const bf16* b, size_t n);
  virtual void residual_backward(bf16* da, bf16* db, const bf16* dout, size_t n);
  virtual void crossentropy_max_forward(float* row_max, const bf16* logits, int N, int Vl,
                                        int vocab_begin, int V);
  virtual void crossentropy_stats_forward(float* stats, const bf16* logits, const float* row_max,
                                          const int* targets, int N, int Vl, int vocab_begin,
                                          int V);
  virtual void crossentropy_fused_forward(float* row_max, float* stats, const bf16* logits,
                                          const int* targets, int N, int Vl, int vocab_begin, int V);
  virtual void crossentropy_backward(bf16* dlogits, const bf16* logits, const float* row_max,
                                     const float* stats, const int* targets, float dloss, int N,
                                     int Vl, int vocab_begin, int V);

  // ---- FP8 linear layers (an Fp8Recipe on bf16 activations: train.precision fp8) ----
  // matmul_forward / matmul_backward of the bf16 overloads (same contracts, bf16 activations
  // and weights, fp32 weight and bias gradients) with the GEMMs in FP8 as `recipe` says: each
  // operand cast with the power-of-two scale of its own amax (inp and weight in
  // recipe.forward, dout in recipe.backward), fp32 accumulation, the bias gradient from the
  // bf16 dout; a GEMM whose shape the FP8 kernels cannot take (model::fp8_gemm_fits) runs in
  // bf16. model/cpu/fp8_ops.hpp is the host twin. Defaults throw (supports(kE4M3) false).
  virtual void matmul_forward_fp8(bf16* out, const bf16* inp, const bf16* weight, const bf16* bias, int N, int C,
                                  int OC, const Fp8Recipe& recipe);
  virtual void matmul_backward_fp8(bf16* dinp, float* dweight, float* dbias, const bf16* dout, const bf16* inp,
                                   const bf16* weight, int N, int C, int OC, const Fp8Recipe& recipe);
  // The pipeline boundary in FP8 (ActivationPolicy::fp8_boundary), for fp32 and bf16
  // activations: packed (model::fp8_boundary_floats(n)) writes [amax of x, 1/scale, the n
  // codes of x cast in format f with its current scale, four to a float]; fp8_unpack writes
  // x (n) back from packed (decode times 1/scale: exact). Defaults throw.
  virtual void fp8_pack(float* packed, const float* x, size_t n, DType f);
  virtual void fp8_pack(float* packed, const bf16* x, size_t n, DType f);
  virtual void fp8_unpack(float* x, const float* packed, size_t n, DType f);
  virtual void fp8_unpack(bf16* x, const float* packed, size_t n, DType f);

 protected:
  // Throws std::logic_error: this backend has no `op` in precision p.
  [[noreturn]] void unsupported(const char* op, DType p) const;
};

}  // namespace holmes::model
