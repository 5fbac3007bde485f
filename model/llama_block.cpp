// Llama's transformer block over one rank's shard, forward, replay (gpt.hpp: Recompute) and
// backward mirrored op by op (gpt_block.cpp is GPT-2's): pre-RMSNorm, fused q/k/v projection
// with rotary embeddings on q and k, grouped-query attention, row-parallel output projection;
// pre-RMSNorm, fused gate/up projection, SwiGLU, row-parallel down projection. No biases.
// Shapes (legend of gpt_config.hpp): N = B*T, QKV = Cl + 2 KVl.
#include <cmath>
#include <vector>

#include "model/gpt_buffers.hpp"

namespace holmes::model {

// The 9 tensors of one Llama layer in layout order (param_layout.hpp): q_proj, k_proj and
// v_proj are adjacent, so qkvw is one (QKV, C) matrix; gate_proj and up_proj likewise one
// (2Fl, C) matrix, guw.
template <class A>
struct Gpt::LlamaLayerParams {
  A *rn1w, *qkvw, *ow, *rn2w, *guw, *downw;
};

template <class A>
Gpt::LlamaLayerParams<A> Gpt::llama_layer_params(A* base, int local_layer) const {
  const size_t first = layer_first_tensor(local_layer);
  auto t = [&](size_t j) { return base + layout_.tensors()[first + j].offset; };
  // 0 input_layernorm, 1-3 q/k/v_proj, 4 o_proj, 5 post_attention_layernorm, 6-7 gate/up, 8 down
  return {t(0), t(1), t(4), t(5), t(6), t(8)};
}

void Gpt::make_rope_table() {
  // cos_sin[t][i] = cos(t * theta^(-2i/HS)), cos_sin[t][HS/2 + i] = the sine, for i < HS/2.
  // Angles in double, rounded once to fp32 (Hugging Face computes them in fp32; the
  // difference is below bf16's resolution, docs/model.md).
  const int HS = cfg_.head_size(), half = HS / 2;
  std::vector<float> host(static_cast<size_t>(max_T_) * HS);
  for (int t = 0; t < max_T_; ++t)
    for (int i = 0; i < half; ++i) {
      const double inv_freq = std::pow(cfg_.rope_theta, -2.0 * i / HS);
      const double angle = t * inv_freq;
      host[static_cast<size_t>(t) * HS + i] = static_cast<float>(std::cos(angle));
      host[static_cast<size_t>(t) * HS + half + i] = static_cast<float>(std::sin(angle));
    }
  rope_ = device::DeviceArray<float>(mem_, host.size());
  rope_.upload(host);
}

template <class A>
void Gpt::llama_block_forward(int l, const A* x, int B, int T) {
  const LlamaLayerParams<A> p = llama_layer_params(weights<A>(), l);
  const LayerActs<A> a = layer_acts<A>(l);
  const Shared<A> s = shared<A>();
  const int N = B * T, C = cfg_.hidden, Cl = cfg_.local_channels(), Fl = cfg_.local_mlp();
  const int QKV = cfg_.local_qkv(), NHl = cfg_.local_heads(), KVHl = cfg_.local_kv_heads();
  const size_t NC = static_cast<size_t>(N) * C;
  k_.rmsnorm_forward(a.ln1, a.ln1_rstd, x, p.rn1w, N, C, cfg_.norm_eps);
  linear_forward<A>(a.qkv, a.ln1, p.qkvw, nullptr, N, C, QKV);
  // q and k heads are the first NHl + KVHl heads of each qkv row: rotated in place.
  k_.rope_forward(a.qkv, a.qkv, rope_.data(), B, T, NHl + KVHl, cfg_.head_size(), QKV);
  k_.attention_forward(a.atty, a.att, a.qkv, B, T, Cl, NHl, KVHl);
  linear_forward<A>(s.scratch, a.atty, p.ow, nullptr, N, Cl, C);
  tp_sum(s.scratch, NC);
  k_.residual_forward(a.res2, x, s.scratch, NC);
  k_.rmsnorm_forward(a.ln2, a.ln2_rstd, a.res2, p.rn2w, N, C, cfg_.norm_eps);
  linear_forward<A>(a.fch, a.ln2, p.guw, nullptr, N, C, 2 * Fl);  // [gate | up]
  k_.swiglu_forward(a.fch_gelu, a.fch, N, Fl);
  linear_forward<A>(s.scratch, a.fch_gelu, p.downw, nullptr, N, Fl, C);
  tp_sum(s.scratch, NC);
  k_.residual_forward(a.res3, a.res2, s.scratch, NC);
}

template <class A>
void Gpt::llama_block_recompute(int l, const A* x, int B, int T) {
  const LlamaLayerParams<A> p = llama_layer_params(weights<A>(), l);
  const LayerActs<A> a = layer_acts<A>(l);
  const Shared<A> s = shared<A>();
  const int N = B * T, C = cfg_.hidden, Cl = cfg_.local_channels(), Fl = cfg_.local_mlp();
  const int QKV = cfg_.local_qkv(), NHl = cfg_.local_heads(), KVHl = cfg_.local_kv_heads();
  const size_t NC = static_cast<size_t>(N) * C;
  const bool full = policy_.recompute == Recompute::kFull;
  // llama_block_forward's ops on the same inputs; selective skips those whose outputs it kept.
  k_.rmsnorm_forward(a.ln1, a.ln1_rstd, x, p.rn1w, N, C, cfg_.norm_eps);
  if (full) {
    linear_forward<A>(a.qkv, a.ln1, p.qkvw, nullptr, N, C, QKV);
    k_.rope_forward(a.qkv, a.qkv, rope_.data(), B, T, NHl + KVHl, cfg_.head_size(), QKV);
  }
  if (full || attention_.probabilities) k_.attention_forward(a.atty, a.att, a.qkv, B, T, Cl, NHl, KVHl);
  if (full) {
    linear_forward<A>(s.scratch, a.atty, p.ow, nullptr, N, Cl, C);
    tp_sum(s.scratch, NC);
    k_.residual_forward(a.res2, x, s.scratch, NC);
  }
  k_.rmsnorm_forward(a.ln2, a.ln2_rstd, a.res2, p.rn2w, N, C, cfg_.norm_eps);
  if (full) linear_forward<A>(a.fch, a.ln2, p.guw, nullptr, N, C, 2 * Fl);
  k_.swiglu_forward(a.fch_gelu, a.fch, N, Fl);
  // The down projection and residual are not replayed: the backward reads neither output.
}

template <class A>
void Gpt::llama_block_backward(int l, const A* x, int B, int T, Pass pass) {
  const LlamaLayerParams<A> p = llama_layer_params(weights<A>(), l);
  const LlamaLayerParams<float> g = llama_layer_params(grads_.data(), l);
  const LayerActs<A> a = layer_acts<A>(l);
  const LayerGrads<A> d = layer_grads<A>(l, pass);
  const Shared<A> s = shared<A>();
  const int N = B * T, C = cfg_.hidden, Cl = cfg_.local_channels(), Fl = cfg_.local_mlp();
  const int QKV = cfg_.local_qkv(), NHl = cfg_.local_heads(), KVHl = cfg_.local_kv_heads();
  const size_t NC = static_cast<size_t>(N) * C;
  const bool input = pass != Pass::kWeights;  // W runs the GEMMs' weight gradients alone
  // dres holds d(res3); the residual passes it straight to res2 and to the MLP output.
  if (input) keep_grad(d.res3, s.dres, NC);
  gemm_backward<A>(pass, s.dmlp, g.downw, nullptr, d.res3, a.fch_gelu, p.downw, N, Fl, C);
  if (input) k_.swiglu_backward(d.fch, a.fch, s.dmlp, N, Fl);
  gemm_backward<A>(pass, s.dln, g.guw, nullptr, d.fch, a.ln2, p.guw, N, C, 2 * Fl);
  if (input) {
    tp_sum(s.dln, NC);  // column-parallel input gradient is partial per shard
    k_.rmsnorm_backward(s.dres, g.rn2w, s.dln, a.res2, p.rn2w, a.ln2_rstd, N, C);
    // dres now holds d(res2).
    keep_grad(d.res2, s.dres, NC);
  }
  gemm_backward<A>(pass, s.datty, g.ow, nullptr, d.res2, a.atty, p.ow, N, Cl, C);
  if (input) {
    k_.attention_backward(d.qkv, s.datt, s.datty, a.qkv, a.atty, a.att, B, T, Cl, NHl, KVHl);
    k_.rope_backward(d.qkv, d.qkv, rope_.data(), B, T, NHl + KVHl, cfg_.head_size(), QKV);
  }
  gemm_backward<A>(pass, s.dln, g.qkvw, nullptr, d.qkv, a.ln1, p.qkvw, N, C, QKV);
  if (input) {
    tp_sum(s.dln, NC);
    k_.rmsnorm_backward(s.dres, g.rn1w, s.dln, x, p.rn1w, a.ln1_rstd, N, C);
    // dres now holds d(x), the gradient of the layer input.
  }
}

template void Gpt::llama_block_forward<float>(int, const float*, int, int);
template void Gpt::llama_block_forward<bf16>(int, const bf16*, int, int);
template void Gpt::llama_block_recompute<float>(int, const float*, int, int);
template void Gpt::llama_block_recompute<bf16>(int, const bf16*, int, int);
template void Gpt::llama_block_backward<float>(int, const float*, int, int, Pass);
template void Gpt::llama_block_backward<bf16>(int, const bf16*, int, int, Pass);

}  // namespace holmes::model
