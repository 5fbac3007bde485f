// Llama's block: forward, the replay of what the activation policy dropped, and backward,
// mirrored op by op. Shapes (legend of model/gpt_config.hpp): N = B*T, QKV = Cl + 2 KVl.
#include "model/llama/block.hpp"

#include "model/llama/counts.hpp"
#include "model/rope_table.hpp"

namespace holmes::model::llama {

Block::Block(const GptConfig& cfg, device::DeviceMemory& mem, int max_T)
    : rope_(make_rope_table(mem, max_T, cfg.head_size(), cfg.rope_theta)) {}

template <class A>
void Block::forward(const BlockEnv& e, const BlockIo<A>& io) {
  Kernels& k = e.k;
  const auto& w = io.w;
  const GptConfig& c = e.cfg;
  const int N = io.rows(), C = c.hidden, Cl = c.local_channels(), Fl = c.local_mlp();
  const int QKV = c.local_qkv(), NHl = c.local_heads(), KVHl = c.local_kv_heads();
  const size_t NC = static_cast<size_t>(N) * C;
  k.rmsnorm_forward(io.act(kNorm1), io.f32(kNorm1Rstd), io.x, w[kNorm1W], N, C, c.norm_eps);
  k.matmul_forward(io.act(kQkv), io.act(kNorm1), w[kQ], nullptr, N, C, QKV);
  // q and k heads are the first NHl + KVHl heads of each qkv row: rotated in place.
  k.rope_forward(io.act(kQkv), io.act(kQkv), rope_.data(), io.pos, io.B, io.T, NHl + KVHl, c.head_size(), QKV);
  k.attention_forward(io.act(kAtty), io.f32(kAtt), io.act(kQkv), io.pos, io.B, io.T, Cl, NHl, KVHl);
  k.matmul_forward(io.out, io.act(kAtty), w[kO], nullptr, N, Cl, C);
  tp_sum(e, io.out, NC);
  k.residual_forward(io.act(kRes2), io.x, io.out, NC);
  k.rmsnorm_forward(io.act(kNorm2), io.f32(kNorm2Rstd), io.act(kRes2), w[kNorm2W], N, C, c.norm_eps);
  k.matmul_forward(io.act(kGateUp), io.act(kNorm2), w[kGate], nullptr, N, C, 2 * Fl);  // [gate | up]
  k.swiglu_forward(io.act(kSwiglu), io.act(kGateUp), N, Fl);
  k.matmul_forward(io.out, io.act(kSwiglu), w[kDown], nullptr, N, Fl, C);
  tp_sum(e, io.out, NC);
  k.residual_forward(io.act(kRes3), io.act(kRes2), io.out, NC);
}

template <class A>
void Block::recompute(const BlockEnv& e, const BlockIo<A>& io) {
  Kernels& k = e.k;
  const auto& w = io.w;
  const GptConfig& c = e.cfg;
  const int N = io.rows(), C = c.hidden, Cl = c.local_channels(), Fl = c.local_mlp();
  const int QKV = c.local_qkv(), NHl = c.local_heads(), KVHl = c.local_kv_heads();
  const size_t NC = static_cast<size_t>(N) * C;
  const bool full = e.policy.recompute == Recompute::kFull;
  // forward's ops on the same inputs; selective skips those whose outputs it kept.
  k.rmsnorm_forward(io.act(kNorm1), io.f32(kNorm1Rstd), io.x, w[kNorm1W], N, C, c.norm_eps);
  if (full) {
    k.matmul_forward(io.act(kQkv), io.act(kNorm1), w[kQ], nullptr, N, C, QKV);
    k.rope_forward(io.act(kQkv), io.act(kQkv), rope_.data(), io.pos, io.B, io.T, NHl + KVHl, c.head_size(), QKV);
  }
  if (full || e.attention.probabilities)
    k.attention_forward(io.act(kAtty), io.f32(kAtt), io.act(kQkv), io.pos, io.B, io.T, Cl, NHl, KVHl);
  if (full) {
    k.matmul_forward(io.out, io.act(kAtty), w[kO], nullptr, N, Cl, C);
    tp_sum(e, io.out, NC);
    k.residual_forward(io.act(kRes2), io.x, io.out, NC);
  }
  k.rmsnorm_forward(io.act(kNorm2), io.f32(kNorm2Rstd), io.act(kRes2), w[kNorm2W], N, C, c.norm_eps);
  if (full) k.matmul_forward(io.act(kGateUp), io.act(kNorm2), w[kGate], nullptr, N, C, 2 * Fl);
  k.swiglu_forward(io.act(kSwiglu), io.act(kGateUp), N, Fl);
  // The down projection and residual are not replayed: the backward reads neither output.
}

template <class A>
void Block::backward(const BlockEnv& e, const BlockIo<A>& io, Pass pass) {
  Kernels& k = e.k;
  const auto& w = io.w;
  const auto& g = io.g;
  const GptConfig& c = e.cfg;
  const int N = io.rows(), C = c.hidden, Cl = c.local_channels(), Fl = c.local_mlp();
  const int QKV = c.local_qkv(), NHl = c.local_heads(), KVHl = c.local_kv_heads();
  const size_t NC = static_cast<size_t>(N) * C;
  const bool input = pass != Pass::kWeights;  // W runs the GEMMs' weight gradients alone
  A* datty = io.scratch[kDatty];
  A* dswiglu = io.scratch[kDswiglu];
  // dres holds d(res3); the residual passes it straight to res2 and to the MLP output.
  if (input) keep_grad(e, io.act(kGradRes3), io.dres, NC);
  gemm_backward(e, pass, dswiglu, g[kDown], nullptr, io.act(kGradRes3), io.act(kSwiglu), w[kDown], N, Fl, C);
  if (input) k.swiglu_backward(io.act(kGradGateUp), io.act(kGateUp), dswiglu, N, Fl);
  gemm_backward(e, pass, io.dln, g[kGate], nullptr, io.act(kGradGateUp), io.act(kNorm2), w[kGate], N, C, 2 * Fl);
  if (input) {
    tp_sum(e, io.dln, NC);  // column-parallel input gradient is partial per shard
    k.rmsnorm_backward(io.dres, g[kNorm2W], io.dln, io.act(kRes2), w[kNorm2W], io.f32(kNorm2Rstd), N, C);
    // dres now holds d(res2).
    keep_grad(e, io.act(kGradRes2), io.dres, NC);
  }
  gemm_backward(e, pass, datty, g[kO], nullptr, io.act(kGradRes2), io.act(kAtty), w[kO], N, Cl, C);
  if (input) {
    k.attention_backward(io.act(kGradQkv), io.datt, datty, io.act(kQkv), io.act(kAtty), io.f32(kAtt), io.pos, io.B, io.T, Cl,
                         NHl, KVHl);
    k.rope_backward(io.act(kGradQkv), io.act(kGradQkv), rope_.data(), io.pos, io.B, io.T, NHl + KVHl, c.head_size(), QKV);
  }
  gemm_backward(e, pass, io.dln, g[kQ], nullptr, io.act(kGradQkv), io.act(kNorm1), w[kQ], N, C, QKV);
  if (input) {
    tp_sum(e, io.dln, NC);
    k.rmsnorm_backward(io.dres, g[kNorm1W], io.dln, io.x, w[kNorm1W], io.f32(kNorm1Rstd), N, C);
    // dres now holds d(x), the gradient of the layer input.
  }
}

template void Block::forward<float>(const BlockEnv&, const BlockIo<float>&);
template void Block::forward<bf16>(const BlockEnv&, const BlockIo<bf16>&);
template void Block::recompute<float>(const BlockEnv&, const BlockIo<float>&);
template void Block::recompute<bf16>(const BlockEnv&, const BlockIo<bf16>&);
template void Block::backward<float>(const BlockEnv&, const BlockIo<float>&, Pass);
template void Block::backward<bf16>(const BlockEnv&, const BlockIo<bf16>&, Pass);

}  // namespace holmes::model::llama
