// gptj's block: forward, replay and backward mirrored op by op from the Kernels ops GPT-2 and
// Llama use. Shapes (legend of model/gpt_config.hpp): N = B*T, Cl = C/tp, Fl = 4C/tp.
#include "test/arch/gptj/block.hpp"

#include "model/rope_table.hpp"
#include "test/arch/gptj/counts.hpp"

namespace holmes::test::gptj {

using model::BlockEnv;
using model::BlockIo;
using model::Kernels;
using model::Pass;
using model::Recompute;

Block::Block(const model::GptConfig& cfg, device::DeviceMemory& mem, int max_T)
    : rope_(model::make_rope_table(mem, max_T, cfg.head_size(), cfg.rope_theta)) {}

template <class A>
void Block::forward(const BlockEnv& e, const BlockIo<A>& io) {
  Kernels& k = e.k;
  const auto& w = io.w;
  const GptConfig& c = e.cfg;
  const int N = io.rows(), C = c.hidden, Cl = c.local_channels(), Fl = c.local_mlp(), NHl = c.local_heads();
  const size_t NC = static_cast<size_t>(N) * C;
  k.layernorm_forward(io.act(kLn), io.f32(kLnMean), io.f32(kLnRstd), io.x, w[kLnW], w[kLnB], N, C);
  // Attention branch: q, k rotated in place, then the output projection into io.out.
  k.matmul_forward(io.act(kQkv), io.act(kLn), w[kQ], nullptr, N, C, 3 * Cl);
  k.rope_forward(io.act(kQkv), io.act(kQkv), rope_.data(), io.pos, io.B, io.T, 2 * NHl, c.head_size(), 3 * Cl);
  k.attention_forward(io.act(kAtty), io.f32(kAtt), io.act(kQkv), io.pos, io.B, io.T, Cl, NHl, NHl);
  k.matmul_forward(io.out, io.act(kAtty), w[kOut], nullptr, N, Cl, C);
  // MLP branch from the same norm, its projection into the block output, the bias once.
  k.matmul_forward(io.act(kFch), io.act(kLn), w[kFcInW], w[kFcInB], N, C, Fl);
  k.gelu_forward(io.act(kFchGelu), io.act(kFch), static_cast<size_t>(N) * Fl);
  k.matmul_forward(io.act(kOutput), io.act(kFchGelu), w[kFcOutW], c.tp_rank == 0 ? w[kFcOutB] : nullptr, N, Fl, C);
  // Both branches' partial sums added, summed over the tensor-parallel group once, plus x.
  k.residual_forward(io.act(kOutput), io.act(kOutput), io.out, NC);
  model::tp_sum(e, io.act(kOutput), NC);
  k.residual_forward(io.act(kOutput), io.act(kOutput), io.x, NC);
}

template <class A>
void Block::recompute(const BlockEnv& e, const BlockIo<A>& io) {
  Kernels& k = e.k;
  const auto& w = io.w;
  const GptConfig& c = e.cfg;
  const int N = io.rows(), C = c.hidden, Cl = c.local_channels(), Fl = c.local_mlp(), NHl = c.local_heads();
  const bool full = e.policy.recompute == Recompute::kFull;
  // forward's ops on the same inputs but the two output projections (the backward reads
  // neither's output); selective skips the GEMMs whose outputs it kept.
  k.layernorm_forward(io.act(kLn), io.f32(kLnMean), io.f32(kLnRstd), io.x, w[kLnW], w[kLnB], N, C);
  if (full) {
    k.matmul_forward(io.act(kQkv), io.act(kLn), w[kQ], nullptr, N, C, 3 * Cl);
    k.rope_forward(io.act(kQkv), io.act(kQkv), rope_.data(), io.pos, io.B, io.T, 2 * NHl, c.head_size(), 3 * Cl);
  }
  if (full || e.attention.probabilities)
    k.attention_forward(io.act(kAtty), io.f32(kAtt), io.act(kQkv), io.pos, io.B, io.T, Cl, NHl, NHl);
  if (full) k.matmul_forward(io.act(kFch), io.act(kLn), w[kFcInW], w[kFcInB], N, C, Fl);
  k.gelu_forward(io.act(kFchGelu), io.act(kFch), static_cast<size_t>(N) * Fl);
}

template <class A>
void Block::backward(const BlockEnv& e, const BlockIo<A>& io, Pass pass) {
  Kernels& k = e.k;
  const auto& w = io.w;
  const auto& g = io.g;
  const GptConfig& c = e.cfg;
  const int N = io.rows(), C = c.hidden, Cl = c.local_channels(), Fl = c.local_mlp(), NHl = c.local_heads();
  const size_t NC = static_cast<size_t>(N) * C;
  const bool input = pass != Pass::kWeights;  // W runs the GEMMs' weight gradients alone
  A* datty = io.scratch[kDatty];
  A* dln_attention = io.scratch[kDlnAttention];
  // dres holds d(out): the gradient of both projections' outputs and, through the residual, of x.
  if (input) model::keep_grad(e, io.act(kGradOut), io.dres, NC);
  // MLP branch: its part of d(ln_1) in dln.
  if (pass == Pass::kWeights)
    model::gemm_backward(e, pass, static_cast<A*>(nullptr), g[kFcOutW], g[kFcOutB], io.act(kGradOut),
                         io.act(kFchGelu), w[kFcOutW], N, Fl, C);
  else
    k.matmul_dgelu_backward(io.act(kGradFch), pass == Pass::kAll ? g[kFcOutW] : nullptr,
                            pass == Pass::kAll ? g[kFcOutB] : nullptr, io.act(kGradOut), io.act(kFchGelu), w[kFcOutW],
                            io.act(kFch), N, Fl, C);
  model::gemm_backward(e, pass, io.dln, g[kFcInW], g[kFcInB], io.act(kGradFch), io.act(kLn), w[kFcInW], N, C, Fl);
  // Attention branch: its part of d(ln_1) beside it.
  model::gemm_backward(e, pass, datty, g[kOut], nullptr, io.act(kGradOut), io.act(kAtty), w[kOut], N, Cl, C);
  if (input) {
    k.attention_backward(io.act(kGradQkv), io.datt, datty, io.act(kQkv), io.act(kAtty), io.f32(kAtt), io.pos, io.B, io.T, Cl,
                         NHl, NHl);
    k.rope_backward(io.act(kGradQkv), io.act(kGradQkv), rope_.data(), io.pos, io.B, io.T, 2 * NHl, c.head_size(), 3 * Cl);
  }
  model::gemm_backward(e, pass, dln_attention, g[kQ], nullptr, io.act(kGradQkv), io.act(kLn), w[kQ], N, C, 3 * Cl);
  if (input) {
    k.residual_forward(io.dln, io.dln, dln_attention, NC);
    model::tp_sum(e, io.dln, NC);  // each shard's column-parallel part of d(ln_1)
    k.layernorm_backward(io.dres, g[kLnW], g[kLnB], io.dln, io.x, w[kLnW], io.f32(kLnMean), io.f32(kLnRstd), N, C);
    // dres now holds d(x): the residual's d(out) plus the norm's.
  }
}

template void Block::forward<float>(const BlockEnv&, const BlockIo<float>&);
template void Block::forward<model::bf16>(const BlockEnv&, const BlockIo<model::bf16>&);
template void Block::recompute<float>(const BlockEnv&, const BlockIo<float>&);
template void Block::recompute<model::bf16>(const BlockEnv&, const BlockIo<model::bf16>&);
template void Block::backward<float>(const BlockEnv&, const BlockIo<float>&, Pass);
template void Block::backward<model::bf16>(const BlockEnv&, const BlockIo<model::bf16>&, Pass);

}  // namespace holmes::test::gptj
