// GPT-2's transformer block over one rank's shard: forward, the replay of what the activation
// policy dropped (gpt.hpp: Recompute), and backward, mirrored op by op (llama_block.cpp is
// Llama's). Pre-LayerNorm, fused q/k/v projection, causal attention, row-parallel output
// projection; pre-LayerNorm, MLP 4C with GELU, row-parallel projection. Shapes (legend of
// gpt_config.hpp): N = B*T, Cl = C/tp, Fl = 4C/tp.
#include "model/gpt_buffers.hpp"

namespace holmes::model {

template <class A>
void Gpt::block_forward(int l, const A* x, int B, int T) {
  if (cfg_.is_llama()) return llama_block_forward<A>(l, x, B, T);
  const LayerParams<A> p = layer_params(weights<A>(), l);
  const LayerActs<A> a = layer_acts<A>(l);
  const Shared<A> s = shared<A>();
  const int N = B * T, C = cfg_.hidden, Cl = cfg_.local_channels(), Fl = cfg_.local_mlp();
  const size_t NC = static_cast<size_t>(N) * C;
  const bool rank0 = cfg_.tp_rank == 0;  // row-parallel biases are added once, before the sum
  k_.layernorm_forward(a.ln1, a.ln1_mean, a.ln1_rstd, x, p.ln1w, p.ln1b, N, C);
  linear_forward<A>(a.qkv, a.ln1, p.qkvw, p.qkvb, N, C, 3 * Cl);
  k_.attention_forward(a.atty, a.att, a.qkv, B, T, Cl, cfg_.local_heads(), cfg_.local_kv_heads());
  linear_forward<A>(s.scratch, a.atty, p.attprojw, rank0 ? p.attprojb : nullptr, N, Cl, C);
  tp_sum(s.scratch, NC);
  k_.residual_forward(a.res2, x, s.scratch, NC);
  k_.layernorm_forward(a.ln2, a.ln2_mean, a.ln2_rstd, a.res2, p.ln2w, p.ln2b, N, C);
  if (policy_.recompute == Recompute::kSelective) {
    // The replay computes GELU alone (block_recompute): so must the forward, or a backend
    // whose GEMM epilogue rounds GELU differently would replay other values.
    linear_forward<A>(a.fch, a.ln2, p.fcw, p.fcb, N, C, Fl);
    k_.gelu_forward(a.fch_gelu, a.fch, static_cast<size_t>(N) * Fl);
  } else {
    linear_gelu_forward<A>(a.fch_gelu, a.fch, a.ln2, p.fcw, p.fcb, N, C, Fl);
  }
  linear_forward<A>(s.scratch, a.fch_gelu, p.fcprojw, rank0 ? p.fcprojb : nullptr, N, Fl, C);
  tp_sum(s.scratch, NC);
  k_.residual_forward(a.res3, a.res2, s.scratch, NC);
}

template <class A>
void Gpt::block_recompute(int l, const A* x, int B, int T) {
  if (cfg_.is_llama()) return llama_block_recompute<A>(l, x, B, T);
  const LayerParams<A> p = layer_params(weights<A>(), l);
  const LayerActs<A> a = layer_acts<A>(l);
  const Shared<A> s = shared<A>();
  const int N = B * T, C = cfg_.hidden, Cl = cfg_.local_channels(), Fl = cfg_.local_mlp();
  const size_t NC = static_cast<size_t>(N) * C;
  const bool rank0 = cfg_.tp_rank == 0;
  const bool full = policy_.recompute == Recompute::kFull;
  // block_forward's ops on the same inputs; selective skips those whose outputs it kept.
  k_.layernorm_forward(a.ln1, a.ln1_mean, a.ln1_rstd, x, p.ln1w, p.ln1b, N, C);
  if (full) linear_forward<A>(a.qkv, a.ln1, p.qkvw, p.qkvb, N, C, 3 * Cl);
  if (full || attention_.probabilities)
    k_.attention_forward(a.atty, a.att, a.qkv, B, T, Cl, cfg_.local_heads(), cfg_.local_kv_heads());
  if (full) {
    linear_forward<A>(s.scratch, a.atty, p.attprojw, rank0 ? p.attprojb : nullptr, N, Cl, C);
    tp_sum(s.scratch, NC);
    k_.residual_forward(a.res2, x, s.scratch, NC);
  }
  k_.layernorm_forward(a.ln2, a.ln2_mean, a.ln2_rstd, a.res2, p.ln2w, p.ln2b, N, C);
  if (full)
    linear_gelu_forward<A>(a.fch_gelu, a.fch, a.ln2, p.fcw, p.fcb, N, C, Fl);
  else
    k_.gelu_forward(a.fch_gelu, a.fch, static_cast<size_t>(N) * Fl);
  // The last GEMM and residual are not replayed: the backward reads neither output.
}

template <class A>
void Gpt::block_backward(int l, const A* x, int B, int T, Pass pass) {
  if (cfg_.is_llama()) return llama_block_backward<A>(l, x, B, T, pass);
  const LayerParams<A> p = layer_params(weights<A>(), l);
  const LayerParams<float> g = layer_params(grads_.data(), l);
  const LayerActs<A> a = layer_acts<A>(l);
  const LayerGrads<A> d = layer_grads<A>(l, pass);
  const Shared<A> s = shared<A>();
  const int N = B * T, C = cfg_.hidden, Cl = cfg_.local_channels(), Fl = cfg_.local_mlp();
  const size_t NC = static_cast<size_t>(N) * C;
  const bool input = pass != Pass::kWeights;  // W runs the GEMMs' weight gradients alone
  // dres holds d(res3); the residual passes it straight to res2 and to the MLP output.
  if (input) keep_grad(d.res3, s.dres, NC);
  if (pass == Pass::kWeights)
    gemm_backward<A>(pass, nullptr, g.fcprojw, g.fcprojb, d.res3, a.fch_gelu, p.fcprojw, N, Fl, C);
  else
    linear_dgelu_backward<A>(d.fch, pass == Pass::kAll ? g.fcprojw : nullptr, pass == Pass::kAll ? g.fcprojb : nullptr,
                          d.res3, a.fch_gelu, p.fcprojw, a.fch, N, Fl, C);
  gemm_backward<A>(pass, s.dln, g.fcw, g.fcb, d.fch, a.ln2, p.fcw, N, C, Fl);
  if (input) {
    tp_sum(s.dln, NC);  // column-parallel input gradient is partial per shard
    k_.layernorm_backward(s.dres, g.ln2w, g.ln2b, s.dln, a.res2, p.ln2w, a.ln2_mean, a.ln2_rstd, N, C);
    // dres now holds d(res2).
    keep_grad(d.res2, s.dres, NC);
  }
  gemm_backward<A>(pass, s.datty, g.attprojw, g.attprojb, d.res2, a.atty, p.attprojw, N, Cl, C);
  if (input)
    k_.attention_backward(d.qkv, s.datt, s.datty, a.qkv, a.atty, a.att, B, T, Cl, cfg_.local_heads(),
                          cfg_.local_kv_heads());
  gemm_backward<A>(pass, s.dln, g.qkvw, g.qkvb, d.qkv, a.ln1, p.qkvw, N, C, 3 * Cl);
  if (input) {
    tp_sum(s.dln, NC);
    k_.layernorm_backward(s.dres, g.ln1w, g.ln1b, s.dln, x, p.ln1w, a.ln1_mean, a.ln1_rstd, N, C);
    // dres now holds d(x), the gradient of the layer input.
  }
}

template void Gpt::block_forward<float>(int, const float*, int, int);
template void Gpt::block_forward<bf16>(int, const bf16*, int, int);
template void Gpt::block_recompute<float>(int, const float*, int, int);
template void Gpt::block_recompute<bf16>(int, const bf16*, int, int);
template void Gpt::block_backward<float>(int, const float*, int, int, Pass);
template void Gpt::block_backward<bf16>(int, const bf16*, int, int, Pass);

}  // namespace holmes::model
