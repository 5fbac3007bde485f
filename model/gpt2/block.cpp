// GPT-2's block: forward, the replay of what the activation policy dropped, and backward,
// mirrored op by op. Shapes (legend of model/gpt_config.hpp): N = B*T, Cl = C/tp, Fl = 4C/tp.
#include "model/gpt2/block.hpp"

#include "model/gpt2/counts.hpp"

namespace holmes::model::gpt2 {

template <class A>
void Block::forward(const BlockEnv& e, const BlockIo<A>& io) {
  Kernels& k = e.k;
  const auto& w = io.w;
  const int N = io.rows(), C = e.cfg.hidden, Cl = e.cfg.local_channels(), Fl = e.cfg.local_mlp();
  const size_t NC = static_cast<size_t>(N) * C;
  const bool rank0 = e.cfg.tp_rank == 0;  // row-parallel biases are added once, before the sum
  k.layernorm_forward(io.act(kLn1), io.f32(kLn1Mean), io.f32(kLn1Rstd), io.x, w[kLn1W], w[kLn1B], N, C);
  k.matmul_forward(io.act(kQkv), io.act(kLn1), w[kQkvW], w[kQkvB], N, C, 3 * Cl);
  k.attention_forward(io.act(kAtty), io.f32(kAtt), io.act(kQkv), io.pos, io.B, io.T, Cl, e.cfg.local_heads(),
                      e.cfg.local_kv_heads());
  k.matmul_forward(io.out, io.act(kAtty), w[kAttProjW], rank0 ? w[kAttProjB] : nullptr, N, Cl, C);
  tp_sum(e, io.out, NC);
  k.residual_forward(io.act(kRes2), io.x, io.out, NC);
  k.layernorm_forward(io.act(kLn2), io.f32(kLn2Mean), io.f32(kLn2Rstd), io.act(kRes2), w[kLn2W], w[kLn2B], N, C);
  if (e.policy.recompute == Recompute::kSelective) {
    // The replay computes GELU alone (recompute): so must the forward, or a backend whose
    // GEMM epilogue rounds GELU differently would replay other values.
    k.matmul_forward(io.act(kFch), io.act(kLn2), w[kFcW], w[kFcB], N, C, Fl);
    k.gelu_forward(io.act(kFchGelu), io.act(kFch), static_cast<size_t>(N) * Fl);
  } else {
    k.matmul_gelu_forward(io.act(kFchGelu), io.act(kFch), io.act(kLn2), w[kFcW], w[kFcB], N, C, Fl);
  }
  k.matmul_forward(io.out, io.act(kFchGelu), w[kFcProjW], rank0 ? w[kFcProjB] : nullptr, N, Fl, C);
  tp_sum(e, io.out, NC);
  k.residual_forward(io.act(kRes3), io.act(kRes2), io.out, NC);
}

template <class A>
void Block::recompute(const BlockEnv& e, const BlockIo<A>& io) {
  Kernels& k = e.k;
  const auto& w = io.w;
  const int N = io.rows(), C = e.cfg.hidden, Cl = e.cfg.local_channels(), Fl = e.cfg.local_mlp();
  const size_t NC = static_cast<size_t>(N) * C;
  const bool rank0 = e.cfg.tp_rank == 0;
  const bool full = e.policy.recompute == Recompute::kFull;
  // forward's ops on the same inputs; selective skips those whose outputs it kept.
  k.layernorm_forward(io.act(kLn1), io.f32(kLn1Mean), io.f32(kLn1Rstd), io.x, w[kLn1W], w[kLn1B], N, C);
  if (full) k.matmul_forward(io.act(kQkv), io.act(kLn1), w[kQkvW], w[kQkvB], N, C, 3 * Cl);
  if (full || e.attention.probabilities)
    k.attention_forward(io.act(kAtty), io.f32(kAtt), io.act(kQkv), io.pos, io.B, io.T, Cl, e.cfg.local_heads(),
                        e.cfg.local_kv_heads());
  if (full) {
    k.matmul_forward(io.out, io.act(kAtty), w[kAttProjW], rank0 ? w[kAttProjB] : nullptr, N, Cl, C);
    tp_sum(e, io.out, NC);
    k.residual_forward(io.act(kRes2), io.x, io.out, NC);
  }
  k.layernorm_forward(io.act(kLn2), io.f32(kLn2Mean), io.f32(kLn2Rstd), io.act(kRes2), w[kLn2W], w[kLn2B], N, C);
  if (full)
    k.matmul_gelu_forward(io.act(kFchGelu), io.act(kFch), io.act(kLn2), w[kFcW], w[kFcB], N, C, Fl);
  else
    k.gelu_forward(io.act(kFchGelu), io.act(kFch), static_cast<size_t>(N) * Fl);
  // The last GEMM and residual are not replayed: the backward reads neither output.
}

template <class A>
void Block::backward(const BlockEnv& e, const BlockIo<A>& io, Pass pass) {
  Kernels& k = e.k;
  const auto& w = io.w;
  const auto& g = io.g;
  const int N = io.rows(), C = e.cfg.hidden, Cl = e.cfg.local_channels(), Fl = e.cfg.local_mlp();
  const size_t NC = static_cast<size_t>(N) * C;
  const bool input = pass != Pass::kWeights;  // W runs the GEMMs' weight gradients alone
  A* datty = io.scratch[kDatty];
  // dres holds d(res3); the residual passes it straight to res2 and to the MLP output.
  if (input) keep_grad(e, io.act(kGradRes3), io.dres, NC);
  if (pass == Pass::kWeights)
    gemm_backward(e, pass, static_cast<A*>(nullptr), g[kFcProjW], g[kFcProjB], io.act(kGradRes3), io.act(kFchGelu),
                  w[kFcProjW], N, Fl, C);
  else
    k.matmul_dgelu_backward(io.act(kGradFch), pass == Pass::kAll ? g[kFcProjW] : nullptr,
                            pass == Pass::kAll ? g[kFcProjB] : nullptr, io.act(kGradRes3), io.act(kFchGelu),
                            w[kFcProjW], io.act(kFch), N, Fl, C);
  gemm_backward(e, pass, io.dln, g[kFcW], g[kFcB], io.act(kGradFch), io.act(kLn2), w[kFcW], N, C, Fl);
  if (input) {
    tp_sum(e, io.dln, NC);  // column-parallel input gradient is partial per shard
    k.layernorm_backward(io.dres, g[kLn2W], g[kLn2B], io.dln, io.act(kRes2), w[kLn2W], io.f32(kLn2Mean),
                         io.f32(kLn2Rstd), N, C);
    // dres now holds d(res2).
    keep_grad(e, io.act(kGradRes2), io.dres, NC);
  }
  gemm_backward(e, pass, datty, g[kAttProjW], g[kAttProjB], io.act(kGradRes2), io.act(kAtty), w[kAttProjW], N, Cl, C);
  if (input)
    k.attention_backward(io.act(kGradQkv), io.datt, datty, io.act(kQkv), io.act(kAtty), io.f32(kAtt), io.pos, io.B, io.T, Cl,
                         e.cfg.local_heads(), e.cfg.local_kv_heads());
  gemm_backward(e, pass, io.dln, g[kQkvW], g[kQkvB], io.act(kGradQkv), io.act(kLn1), w[kQkvW], N, C, 3 * Cl);
  if (input) {
    tp_sum(e, io.dln, NC);
    k.layernorm_backward(io.dres, g[kLn1W], g[kLn1B], io.dln, io.x, w[kLn1W], io.f32(kLn1Mean), io.f32(kLn1Rstd), N,
                         C);
    // dres now holds d(x), the gradient of the layer input.
  }
}

template void Block::forward<float>(const BlockEnv&, const BlockIo<float>&);
template void Block::forward<bf16>(const BlockEnv&, const BlockIo<bf16>&);
template void Block::recompute<float>(const BlockEnv&, const BlockIo<float>&);
template void Block::recompute<bf16>(const BlockEnv&, const BlockIo<bf16>&);
template void Block::backward<float>(const BlockEnv&, const BlockIo<float>&, Pass);
template void Block::backward<bf16>(const BlockEnv&, const BlockIo<bf16>&, Pass);

}  // namespace holmes::model::gpt2
