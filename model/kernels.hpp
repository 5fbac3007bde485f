// The op set of the GPT, implemented once per backend with the same names and argument
// order (model/cpu/ for fp32 on the host, cuda/ for the GPU). Conventions:
//   - op pairs <op>_forward / <op>_backward; gradients prefixed d;
//   - arguments in the order outputs, inputs, sizes;
//   - all pointers address memory of the backend's device; "accumulates" means +=,
//     "writes" means =. Shapes use the legend of model/gpt_config.hpp.
//   - Linear weights are (OC, C) as in torch.nn.Linear: out = inp @ weight^T + bias.
#pragma once

#include <cstddef>

namespace holmes::model {

// The scalars of one AdamW step (computed once per step on the host; engine/train/adamw.hpp
// has the formula and the bias corrections).
struct AdamWStep {
  float beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f;
  float decay_factor = 1.0f;  // 1 - lr * weight_decay where the run decays, else 1
  float step_size = 0.0f;     // lr / (1 - beta1^t)
  float inv_sqrt_bc2 = 1.0f;  // 1 / sqrt(1 - beta2^t)
  float grad_scale = 1.0f;    // gradient clipping factor
};

class Kernels {
 public:
  virtual ~Kernels() = default;
  virtual const char* name() const = 0;

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
  // dinp (N,C) writes (nullptr = skip); dweight (OC,C) and dbias (OC; nullptr = none) accumulate.
  virtual void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                               const float* inp, const float* weight, int N, int C, int OC) = 0;

  // Causal self-attention over NH heads of size HS = C/NH. qkv (B,T,3C) holds [q | k | v]
  // blocks of C channels, head h at channels [h*HS, (h+1)*HS) of each block. out (B,T,C)
  // writes; att (B,NH,T,T) writes the softmax probabilities (kept for backward; entries
  // above the diagonal are 0). Here C and NH are this shard's Cl and NHl.
  virtual void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C,
                                 int NH) = 0;
  // dqkv (B,T,3C) writes; scratch (B,NH,T,T) is workspace; dout (B,T,C).
  virtual void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv,
                                  const float* att, int B, int T, int C, int NH) = 0;

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
};

}  // namespace holmes::model
