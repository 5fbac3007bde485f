// Document masking on the GPU against the CPU twins (model/cpu): attention with document
// positions for the fallback (fp32, bf16) and exact (fp32) methods (the cudnn method's rows:
// document_mask_cudnn_test.cpp), rotary and learned positions, the loss masks, and
// a whole document-masked GPT-2 and Llama (fp32) against the same model on the CPU. Shapes odd
// and aligned, outputs poisoned with NaN first, two backward runs bit for bit. Skips without a
// GPU.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <vector>

#include "backends/backends.hpp"
#include "cuda/attention.hpp"
#include "cuda/check.hpp"
#include "cuda/device_buffer.hpp"
#include "cuda/loss_mask.hpp"
#include "cuda/rope.hpp"
#include "cuda/vocab.hpp"
#include "cuda_test_util.hpp"
#include "model/cpu/cpu_ops.hpp"
#include "model/gpt.hpp"
#include "model/gpt2/gpt2.hpp"
#include "model/llama/llama.hpp"

using namespace holmes::cuda;
using namespace holmes::cuda::test;
using holmes::DType;

namespace {

using Shape = AttentionShape;

void check_masked_attention(Attention::Method method, DType p, const Shape& s) {
  const bool is_bf16 = p == DType::kBf16;
  const int HS = s.C / s.NH, W = (s.NH + 2 * s.KVH) * HS;
  INFO(attention_method_name(method) << " " << holmes::dtype_name(p) << " B=" << s.B << " T=" << s.T
                                     << " C=" << s.C << " NH=" << s.NH << " KVH=" << s.KVH);
  const std::size_t n_qkv = std::size_t(s.B) * s.T * W, n_out = std::size_t(s.B) * s.T * s.C;
  const std::size_t n_att = std::size_t(s.B) * s.NH * s.T * s.T;
  auto qkv = random_floats(n_qkv, 3000 + s.T), dout = random_floats(n_out, 4000 + s.T);
  std::vector<std::uint16_t> qkv_bits, dout_bits;
  if (is_bf16) qkv_bits = round_to_bf16(qkv), dout_bits = round_to_bf16(dout);
  const std::vector<int> pos = document_positions(s.B, s.T, {5, 1, 17, s.T});
  std::vector<float> out(n_out), att(n_att), scratch(n_att), dqkv(n_qkv);
  holmes::model::cpu::attention_forward(out.data(), att.data(), qkv.data(), s.B, s.T, s.C, s.NH, s.KVH, pos.data());
  holmes::model::cpu::attention_backward(dqkv.data(), scratch.data(), dout.data(), qkv.data(), att.data(), s.B, s.T,
                                         s.C, s.NH, s.KVH);
  Attention gpu(nullptr, method);
  const auto plan = gpu.plan(p, s.B, s.T, s.C, s.NH, s.KVH, /*document_mask=*/true);
  REQUIRE(gpu.method(p) == method);
  DeviceBuffer g_pos = to_device(pos);
  DeviceBuffer g_qkv = is_bf16 ? to_device(qkv_bits) : to_device(qkv);
  DeviceBuffer g_dout = is_bf16 ? to_device(dout_bits) : to_device(dout);
  DeviceBuffer g_out = nan_buffer(n_out * (is_bf16 ? 2 : 4)), g_att = nan_buffer(plan.state_floats * 4);
  DeviceBuffer g_scratch = nan_buffer(std::max<std::size_t>(plan.scratch_floats, 1) * 4);
  const int* dpos = g_pos.as<int>();
  if (is_bf16)
    gpu.forward(g_out.as<holmes::cuda::bf16>(), g_att.as<float>(), g_qkv.as<holmes::cuda::bf16>(), s.B, s.T, s.C,
                s.NH, s.KVH, dpos);
  else
    gpu.forward(g_out.as<float>(), g_att.as<float>(), g_qkv.as<float>(), s.B, s.T, s.C, s.NH, s.KVH, dpos);
  CHECK(normalized_error(download_values(g_out, n_out, is_bf16), out) <= (is_bf16 ? 1e-2 : 1e-5));
  std::vector<float> got_att = download_values(g_att, n_att, is_bf16);
  CHECK(normalized_error(got_att, att) <= (is_bf16 ? 1e-2 : 1e-5));
  for (std::size_t i = 0; i < n_att; ++i)
    if (att[i] == 0.0f) REQUIRE(got_att[i] == 0.0f);  // outside the document's block: exactly 0
  std::vector<std::vector<unsigned char>> runs;
  for (int run = 0; run < 2; ++run) {
    DeviceBuffer g_dqkv = nan_buffer(n_qkv * (is_bf16 ? 2 : 4));
    if (is_bf16)
      gpu.backward(g_dqkv.as<holmes::cuda::bf16>(), g_scratch.as<float>(), g_dout.as<holmes::cuda::bf16>(),
                   g_qkv.as<holmes::cuda::bf16>(), g_out.as<holmes::cuda::bf16>(), g_att.as<float>(), s.B, s.T, s.C,
                   s.NH, s.KVH, dpos);
    else
      gpu.backward(g_dqkv.as<float>(), g_scratch.as<float>(), g_dout.as<float>(), g_qkv.as<float>(),
                   g_out.as<float>(), g_att.as<float>(), s.B, s.T, s.C, s.NH, s.KVH, dpos);
    CHECK(normalized_error(download_values(g_dqkv, n_qkv, is_bf16), dqkv) <= (is_bf16 ? 2e-2 : 1e-4));
    runs.emplace_back(n_qkv * (is_bf16 ? 2 : 4));
    g_dqkv.download(runs.back().data(), runs.back().size());
  }
  CHECK(runs[0] == runs[1]);
}

}  // namespace

TEST_CASE("document-masked attention on the GPU equals the CPU twin", "[cuda][attention][document_mask]") {
  if (!gpu_or_skip()) return;
  for (const Shape& s : {Shape{3, 37, 80, 5, 5}, Shape{2, 64, 128, 4, 2}, Shape{2, 256, 512, 8, 2}}) {
    check_masked_attention(Attention::Method::kFallback, DType::kF32, s);
    check_masked_attention(Attention::Method::kExact, DType::kF32, s);
    check_masked_attention(Attention::Method::kFallback, DType::kBf16, s);
  }
  // The cudnn method with document masks: document_mask_cudnn_test.cpp.
}

TEST_CASE("document positions on the GPU: rotary, learned positions and loss masks equal the CPU twins",
          "[cuda][attention][document_mask]") {
  if (!gpu_or_skip()) return;
  const int B = 3, T = 29, H = 6, HS = 8, stride = 64, C = 40, V = 53;
  const std::vector<int> pos = document_positions(B, T, {4, 11, 1, 29});
  DeviceBuffer g_pos = to_device(pos);
  const int* dpos = g_pos.as<int>();
  auto cs = random_floats(static_cast<std::size_t>(T) * HS, 5);
  auto x = random_floats(static_cast<std::size_t>(B) * T * stride, 6);
  std::vector<float> want(x.size()), back(x.size());
  holmes::model::cpu::rope_forward(want.data(), x.data(), cs.data(), B, T, H, HS, stride, pos.data());
  holmes::model::cpu::rope_backward(back.data(), x.data(), cs.data(), B, T, H, HS, stride, pos.data());
  DeviceBuffer g_cs = to_device(cs), g_x = to_device(x);
  DeviceBuffer g_y = to_device(x);  // channels past H*HS keep x
  rope_forward(g_y.as<float>(), g_x.as<float>(), g_cs.as<float>(), dpos, B, T, H, HS, stride);
  std::vector<float> cpu_y = x;
  for (int r = 0; r < B * T; ++r)
    for (int c = 0; c < H * HS; ++c) cpu_y[r * stride + c] = want[r * stride + c];
  CHECK(normalized_error(download_values(g_y, x.size(), false), cpu_y) <= 1e-6);
  DeviceBuffer g_d = to_device(x);
  rope_backward(g_d.as<float>(), g_x.as<float>(), g_cs.as<float>(), dpos, B, T, H, HS, stride);
  std::vector<float> cpu_d = x;
  for (int r = 0; r < B * T; ++r)
    for (int c = 0; c < H * HS; ++c) cpu_d[r * stride + c] = back[r * stride + c];
  CHECK(normalized_error(download_values(g_d, x.size(), false), cpu_d) <= 1e-6);

  const auto tokens = random_ints(static_cast<std::size_t>(B) * T, V, 7);
  auto wte = random_floats(static_cast<std::size_t>(V) * C, 8), wpe = random_floats(static_cast<std::size_t>(T) * C, 9);
  auto dout = random_floats(static_cast<std::size_t>(B) * T * C, 10);
  std::vector<float> emb(dout.size()), dwte(wte.size(), 0.0f), dwpe(wpe.size(), 0.0f);
  holmes::model::cpu::embedding_forward(emb.data(), tokens.data(), wte.data(), wpe.data(), B, T, C, 0, V, pos.data());
  holmes::model::cpu::embedding_backward(dwte.data(), dwpe.data(), dout.data(), tokens.data(), B, T, C, 0, V,
                                         pos.data());
  DeviceBuffer g_tok = to_device(tokens), g_wte = to_device(wte), g_wpe = to_device(wpe), g_dout = to_device(dout);
  DeviceBuffer g_emb = nan_buffer(emb.size() * 4);
  embedding_forward(g_emb.as<float>(), g_tok.as<int>(), dpos, g_wte.as<float>(), g_wpe.as<float>(), B, T, C, 0, V);
  CHECK(normalized_error(download_values(g_emb, emb.size(), false), emb) <= 1e-6);
  DeviceBuffer g_dwte = to_device(std::vector<float>(wte.size(), 0.0f));
  DeviceBuffer g_dwpe = to_device(std::vector<float>(wpe.size(), 0.0f));
  embedding_backward(g_dwte.as<float>(), g_dwpe.as<float>(), g_dout.as<float>(), g_tok.as<int>(), dpos, B, T, C, 0,
                     V);
  CHECK(normalized_error(download_values(g_dwte, dwte.size(), false), dwte) <= 1e-5);
  CHECK(normalized_error(download_values(g_dwpe, dwpe.size(), false), dwpe) <= 1e-5);

  std::vector<int> targets = {3, -1, 0, -1, 7};
  std::vector<float> losses = {1, 2, 3, 4, 5}, rows(5 * 9, 0.25f);
  DeviceBuffer g_t = to_device(targets), g_l = to_device(losses), g_r = to_device(rows);
  mask_losses(g_l.as<float>(), g_t.as<int>(), 5);
  mask_rows(g_r.as<float>(), g_t.as<int>(), 5, 9);
  holmes::model::cpu::mask_losses(losses.data(), targets.data(), 5);
  holmes::model::cpu::mask_rows(rows.data(), targets.data(), 5, 9);
  CHECK(download_values(g_l, 5, false) == losses);
  CHECK(download_values(g_r, rows.size(), false) == rows);
}

TEST_CASE("a document-masked model on the GPU equals it on the CPU (fp32)", "[cuda][model][document_mask]") {
  if (!gpu_or_skip()) return;
  using namespace holmes::model;
  for (const GptConfig& cfg : {gpt2::config(2, 64, 4, 97, 64), llama::config(2, 64, 4, 2, 96, 97, 64)}) {
    INFO(cfg.arch);
    const int B = 2, T = 48;
    ActivationPolicy policy;
    policy.document_mask = true;
    auto cpu = holmes::backends::make_backend(holmes::backends::Device::kCpu);
    auto gpu = holmes::backends::make_backend(holmes::backends::Device::kCuda);
    Gpt a(cfg, cpu, B, T, nullptr, 1, DType::kF32, policy), g(cfg, gpu, B, T, nullptr, 1, DType::kF32, policy);
    a.init_weights(11);
    g.load_params(a.read_params());
    const auto tokens = random_ints(B * T, cfg.vocab, 12);
    auto targets = random_ints(B * T, cfg.vocab, 13);
    const std::vector<int> pos = document_positions(B, T, {7, 20, 1, 48});
    for (int i = 0; i + 1 < B * T; ++i)
      if (pos[i + 1] == 0) targets[i] = -1;  // data.mask_document_start
    a.zero_grad();
    g.zero_grad();
    const float la = a.forward(tokens.data(), targets.data(), B, T, pos.data());
    const float lg = g.forward(tokens.data(), targets.data(), B, T, pos.data());
    CHECK(lg == Approx(la).epsilon(1e-5));
    a.backward();
    g.backward();
    const std::vector<float> ga(a.grads(), a.grads() + a.num_params());
    std::vector<float> gg(g.num_params());
    gpu.memory->download(gg.data(), g.grads(), gg.size() * sizeof(float));
    CHECK(normalized_error(gg, ga) <= 1e-4);
  }
}
