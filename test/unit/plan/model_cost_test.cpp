#include <catch2/catch.hpp>

#include "engine/plan/cost_model.hpp"
#include "engine/plan/links.hpp"
#include "engine/plan/model_size.hpp"
#include "model/gpt2/gpt2.hpp"

namespace hp = holmes::plan;

TEST_CASE("vocabulary padding: multiple of 128, or 64 x tp when larger", "[model_size]") {
  CHECK(hp::padded_vocab(257, 1) == 384);
  CHECK(hp::padded_vocab(50257, 1) == 50304);
  CHECK(hp::padded_vocab(50257, 4) == 50432);  // multiple of 256
  CHECK(hp::padded_vocab(128, 1) == 128);
}

TEST_CASE("parameter count of the 7.5B example by hand", "[model_size]") {
  const holmes::model::GptConfig s = holmes::model::gpt2::config(36, 4096, 32, 50257, 2048);
  // Block: 12 C^2 + 13 C = 12 * 16777216 + 53248 = 201379840.
  CHECK(hp::block_params(s) == 201379840);
  // Embeddings: 50304 * 4096 + 2048 * 4096 = 214433792; final norm 8192.
  CHECK(hp::embedding_params(s, 1) == 214433792);
  CHECK(hp::total_params(s, 1) == int64_t{36} * 201379840 + 214433792 + 8192);
}

TEST_CASE("FLOPs per token: 3 x (L (24 C^2 + 4 T C) + 2 C Vp)", "[model_size]") {
  const holmes::model::GptConfig s = holmes::model::gpt2::config(2, 64, 4, 257, 128);
  double per_block = 24.0 * 64 * 64 + 4.0 * 128 * 64;
  CHECK(hp::block_forward_flops_per_token(s, 128) == Approx(per_block));
  CHECK(hp::train_flops_per_token(s, 1, 128) == Approx(3 * (2 * per_block + 2.0 * 64 * 384)));
}

TEST_CASE("activation bytes per layer: the model's buffers, by recompute mode", "[model_size]") {
  const holmes::model::GptConfig s = holmes::model::gpt2::config(1, 1024, 16, 50257, 2048);
  using R = holmes::spec::Recompute;
  const double C = 1024, F = 4 * C, t = 2, tokens = 2048.0 * 4;
  // bf16 (cuDNN attention: B NH/t T fp32 softmax statistics), per token: none keeps ln1, res2,
  // ln2, res3 (4C), qkv 3C/t, attention's output C/t, fc's pre-activation and GELU (2F/t),
  // two LayerNorms' mean and rstd (16 bytes).
  const double stats_bf16 = 4.0 * 16 / 2 * 2048 * 4;
  const double none = tokens * (2 * (4 * C + 3 * C / t + C / t + 2 * F / t) + 16) + stats_bf16;
  CHECK(hp::block_activation_bytes(s, 2048, 4, 2, 2) == Approx(none));
  // selective keeps the GEMM outputs and the residual stream; the fused attention's output and
  // state stay too.
  const double selective = tokens * 2 * (2 * C + 3 * C / t + F / t + C / t) + stats_bf16;
  CHECK(hp::block_activation_bytes(s, 2048, 4, 2, 2, {R::kSelective}) == Approx(selective));
  CHECK(hp::block_activation_bytes(s, 2048, 4, 2, 2, {R::kFull}) == Approx(tokens * 2 * C));
  // What is not kept is replayed into one layer's buffers.
  CHECK(hp::recompute_work_bytes(s, 2048, 4, 2, 2, {R::kFull}) == Approx(none - tokens * 2 * C));
  CHECK(hp::recompute_work_bytes(s, 2048, 4, 2, 2, {R::kNone}) == 0);
  // fp32: the exact attention keeps B NH/t T^2 probabilities, which selective replays.
  const double probs = 4.0 * 16 / 2 * 4 * 2048.0 * 2048;
  CHECK(hp::block_activation_bytes(s, 2048, 4, 2, 4) ==
        Approx(tokens * (4 * (4 * C + 3 * C / t + C / t + 2 * F / t) + 16) + probs));
  CHECK(hp::block_activation_bytes(s, 2048, 4, 2, 4, {R::kSelective}) ==
        Approx(tokens * 4 * (2 * C + 3 * C / t + F / t)));
  // A split backward keeps the GEMM output gradients from B to W: d(res3), d(res2), d(fc), d(qkv).
  CHECK(hp::block_activation_bytes(s, 2048, 4, 2, 2, {R::kFull, true}) ==
        Approx(tokens * 2 * C + tokens * 2 * (2 * C + F / t + 3 * C / t)));
}

TEST_CASE("recomputation's extra forward FLOPs", "[model_size]") {
  const holmes::model::GptConfig s = holmes::model::gpt2::config(2, 64, 4, 257, 128);
  using R = holmes::spec::Recompute;
  CHECK(hp::recompute_flops_per_token(s, 128, 1, 4, {R::kNone}) == 0);
  // Selective replays the attention's softmax where it is not fused (fp32), nothing else costs FLOPs.
  CHECK(hp::recompute_flops_per_token(s, 128, 1, 4, {R::kSelective}) == Approx(4.0 * 128 * 64));
  CHECK(hp::recompute_flops_per_token(s, 128, 1, 2, {R::kSelective}) == 0);
  // Full: the block's forward but the MLP's last GEMM (2 x 4C^2), over tp; twice with a split backward.
  const double full = 24.0 * 64 * 64 + 4.0 * 128 * 64 - 8.0 * 64 * 64;
  CHECK(hp::recompute_flops_per_token(s, 128, 2, 2, {R::kFull}) == Approx(full / 2));
  CHECK(hp::recompute_flops_per_token(s, 128, 2, 2, {R::kFull, true}) == Approx(full));
}

TEST_CASE("alpha-beta ring collectives, closed form", "[cost_model]") {
  hp::LinkCost l;
  l.gbps_per_rank = 100;  // 1.25e10 bytes/s
  l.latency_s = 5e-6;
  // Reduce-scatter of 1 GB over 4 ranks: 3 steps of (5 us + 0.25 GB / 12.5 GB/s).
  CHECK(hp::ring_reduce_scatter_s(l, 4, 1e9) == Approx(3 * (5e-6 + 0.02)));
  CHECK(hp::ring_all_gather_s(l, 4, 1e9) == Approx(3 * (5e-6 + 0.02)));
  CHECK(hp::ring_all_reduce_s(l, 4, 1e9) == Approx(6 * (5e-6 + 0.02)));
  CHECK(hp::ring_all_reduce_s(l, 1, 1e9) == 0);
  CHECK(l.transfer_s(1.25e9) == Approx(0.1 + 5e-6));
}

namespace {

// B=2 T=128 C=256 micro-batches and a middle stage (it sends forward and backward) of tp 2.
holmes::plan::Workload small_workload(bool cuda) {
  holmes::plan::Workload w;
  w.shape = holmes::model::gpt2::config(4, 256, 8, 1000, 128);
  w.seq_len = 128;
  w.micro_batch = 2;
  w.act_dtype = cuda ? holmes::DType::kBf16 : holmes::DType::kF32;
  return w;
}

holmes::plan::StageCost middle_stage() {
  holmes::plan::StageCost mid;
  mid.tp = 2;
  mid.tflops = 100;
  return mid;
}

holmes::plan::LinkCost link_of(holmes::plan::LinkKind kind, double gbps, double latency_s) {
  holmes::plan::LinkCost l;
  l.kind = kind;
  l.gbps_per_rank = gbps;
  l.latency_s = latency_s;
  return l;
}

}  // namespace

TEST_CASE("pipeline sends over Ethernet with parallel.cross_island: gloo pay two host copies", "[cost_model]") {
  holmes::plan::Workload w = small_workload(true);
  holmes::plan::StageCost mid = middle_stage();
  const holmes::plan::LinkCost eth = link_of(holmes::plan::LinkKind::kEthernet, 10, 30e-6);
  mid.next_link = mid.prev_link = eth;
  const double act = 2.0 * 128 * 256 * w.act_bytes() / mid.tp;  // B T C bytes split over tp
  const double nccl = mid.time(w, 2).pp_s;
  CHECK(nccl == Approx(2 * eth.transfer_s(act)));
  w.staging = holmes::plan::Workload::Staging::kEthernet;
  CHECK(mid.time(w, 2).pp_s == Approx(nccl + 2 * 2 * act / (holmes::plan::kHostCopyGBps * 1e9)));
  // RDMA links inside an island are NCCL whatever cross_island says.
  holmes::plan::LinkCost ib = eth;
  ib.kind = holmes::plan::LinkKind::kIb;
  mid.next_link = mid.prev_link = ib;
  CHECK(mid.time(w, 2).pp_s == Approx(2 * ib.transfer_s(act)));
}

TEST_CASE("tensor-parallel sums and pipeline sends are priced in the activation precision on NCCL", "[cost_model]") {
  holmes::plan::Workload w = small_workload(false);
  holmes::plan::StageCost mid = middle_stage();
  const holmes::plan::LinkCost link = link_of(holmes::plan::LinkKind::kIntraNode, 400, 5e-6);
  mid.tp_link = mid.next_link = mid.prev_link = link;
  const auto fp32 = mid.time(w, 2);
  w.act_dtype = holmes::DType::kBf16;
  const auto bf16 = mid.time(w, 2);
  const int sums = 4 * 2;  // a middle stage of 2 layers: 4 sums per layer
  const double hop = link.latency_s * 2 * (mid.tp - 1);  // a ring all-reduce's latency part
  CHECK(bf16.tp_s - sums * hop == Approx((fp32.tp_s - sums * hop) / 2));  // NCCL sums bf16: half the bytes
  CHECK(bf16.pp_s - 2 * link.latency_s == Approx((fp32.pp_s - 2 * link.latency_s) / 2));  // two sends
  // Staged through Gloo, the sums travel widened to fp32 and every transfer pays two host copies.
  w.staging = holmes::plan::Workload::Staging::kAll;
  CHECK(w.tp_wire_bytes() == 4);
  const auto staged = mid.time(w, 2);
  const double act = 2.0 * 128 * 256 * w.act_bytes();  // B T C of the small workload in bf16
  CHECK(staged.tp_s == Approx(fp32.tp_s + sums * 2 * act / (holmes::plan::kHostCopyGBps * 1e9)));
  CHECK(staged.pp_s == Approx(bf16.pp_s + 2 * 2 * (act / mid.tp) / (holmes::plan::kHostCopyGBps * 1e9)));
}
