// The kernel rows of a calibrate table: GEMMs, attention, the optimizer, memory copies, launch.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "engine/tools/calibrate_parts.hpp"
#include "model/counts.hpp"
#include "model/kernels.hpp"

namespace holmes::tools {

namespace {

// A zeroed buffer of `n` elements of the activation precision (bf16: two a float).
struct Buffer {
  device::DeviceArray<float> a;
  Buffer(device::DeviceMemory& mem, size_t n, bool bf16) : a(mem, bf16 ? (n + 1) / 2 : n) { a.zero(); }
  float* f() { return a.data(); }
  model::bf16* h() { return reinterpret_cast<model::bf16*>(a.data()); }
};

// One GEMM of a block or the head at a tp rank's slice: out (N, OC) = inp (N, C) W (OC, C)^T.
struct GemmShape {
  const char* name;
  long c, oc;  // in and out features of the slice
};

std::vector<GemmShape> gemms_of(const model::GptConfig& g, int tp) {
  const long C = g.hidden, HS = g.hidden / g.heads, NH = g.heads / tp, KVH = g.kv_heads / tp;
  const long F = g.ffn_hidden / tp, V = model::GptConfig::pad_vocab(g.vocab, tp) / tp;
  const long qkv = (NH + 2 * KVH) * HS;
  // The MLP's first GEMM is what the shard's GEMM weights leave after the other three: F
  // wide for a plain MLP, 2F for a gated one (llama's gate | up in one GEMM).
  const long mlp_in = (model::block_counts(g.shard(tp, 0)).gemm_weights - C * qkv - NH * HS * C - F * C) / C;
  return {{"qkv", C, qkv}, {"attn_out", NH * HS, C}, {"mlp_in", C, mlp_in}, {"mlp_out", F, C}, {"head", C, V}};
}

topo::GemmTime time_gemm(model::Kernels& k, device::DeviceMemory& mem, const GemmShape& s, int tp, long N, bool bf16,
                         int reps) {
  Buffer inp(mem, N * s.c, bf16), w(mem, s.oc * s.c, bf16), out(mem, N * s.oc, bf16), dinp(mem, N * s.c, bf16);
  device::DeviceArray<float> dw(mem, s.oc * s.c);  // weight gradients are fp32 in both precisions
  dw.zero();
  const int n = static_cast<int>(N), c = static_cast<int>(s.c), oc = static_cast<int>(s.oc);
  topo::GemmTime g{s.name, tp, N, s.oc, s.c};
  if (bf16) {
    g.forward_ms = least_ms(mem, reps, [&] { k.matmul_forward(out.h(), inp.h(), w.h(), nullptr, n, c, oc); });
    g.input_grad_ms =
        least_ms(mem, reps, [&] { k.matmul_backward(dinp.h(), nullptr, nullptr, out.h(), inp.h(), w.h(), n, c, oc); });
    g.weight_grad_ms =
        least_ms(mem, reps, [&] { k.matmul_backward(nullptr, dw.data(), nullptr, out.h(), inp.h(), w.h(), n, c, oc); });
  } else {
    g.forward_ms = least_ms(mem, reps, [&] { k.matmul_forward(out.f(), inp.f(), w.f(), nullptr, n, c, oc); });
    g.input_grad_ms =
        least_ms(mem, reps, [&] { k.matmul_backward(dinp.f(), nullptr, nullptr, out.f(), inp.f(), w.f(), n, c, oc); });
    g.weight_grad_ms =
        least_ms(mem, reps, [&] { k.matmul_backward(nullptr, dw.data(), nullptr, out.f(), inp.f(), w.f(), n, c, oc); });
  }
  return g;
}

topo::AttentionTime time_attention(model::Kernels& k, device::DeviceMemory& mem, const model::GptConfig& g, int tp,
                                   int B, int T, DType p, int reps) {
  const int HS = g.hidden / g.heads, NH = g.heads / tp, KVH = g.kv_heads / tp, C = NH * HS;
  const bool bf16 = p == DType::kBf16;
  const model::AttentionPlan plan = k.plan_attention(p, B, T, C, NH, KVH);
  const size_t rows = size_t(B) * T, qkv_n = rows * size_t(NH + 2 * KVH) * HS;
  Buffer qkv(mem, qkv_n, bf16), out(mem, rows * C, bf16), dqkv(mem, qkv_n, bf16), dout(mem, rows * C, bf16);
  device::DeviceArray<float> att(mem, std::max<size_t>(1, plan.state_floats)),
      scratch(mem, std::max<size_t>(1, plan.scratch_floats));
  topo::AttentionTime a{tp, B, T};
  if (bf16) {
    a.forward_ms = least_ms(mem, reps, [&] { k.attention_forward(out.h(), att.data(), qkv.h(), B, T, C, NH, KVH); });
    a.backward_ms = least_ms(mem, reps, [&] {
      k.attention_backward(dqkv.h(), scratch.data(), dout.h(), qkv.h(), out.h(), att.data(), B, T, C, NH, KVH);
    });
  } else {
    a.forward_ms = least_ms(mem, reps, [&] { k.attention_forward(out.f(), att.data(), qkv.f(), B, T, C, NH, KVH); });
    a.backward_ms = least_ms(mem, reps, [&] {
      k.attention_backward(dqkv.f(), scratch.data(), dout.f(), qkv.f(), out.f(), att.data(), B, T, C, NH, KVH);
    });
  }
  return a;
}

}  // namespace

void measure_kernels(const model::GptConfig& global, model::Backend& backend, DType precision,
                     const ComputeSweep& sweep, int seq_len, topo::ComputeTable& table,
                     const std::function<void(const std::string&)>& say) {
  model::Kernels& k = *backend.kernels;
  device::DeviceMemory& mem = *backend.memory;
  const bool bf16 = precision == DType::kBf16;
  for (int tp : sweep.tp)
    for (int mb : sweep.micro_batches) {
      const long N = long(mb) * seq_len;
      for (const GemmShape& s : gemms_of(global, tp)) {
        table.gemms.push_back(time_gemm(k, mem, s, tp, N, bf16, sweep.reps));
        const topo::GemmTime& g = table.gemms.back();
        say(fmt::format("GEMM {} tp {} ({} x {} x {}): forward {:.4g} ms ({:.3g} TFLOP/s), input gradient {:.4g}, "
                        "weight gradient {:.4g}", g.name, tp, g.m, g.n, g.k, g.forward_ms,
                        g.forward_ms > 0 ? g.flops() / g.forward_ms / 1e9 : 0.0, g.input_grad_ms, g.weight_grad_ms));
      }
      table.attention.push_back(time_attention(k, mem, global, tp, mb, seq_len, precision, sweep.reps));
      say(fmt::format("attention tp {} micro-batch {}: forward {:.4g} ms, backward {:.4g} ms", tp, mb,
                      table.attention.back().forward_ms, table.attention.back().backward_ms));
    }
  // The optimizer's update per parameter (its moments and weights in fp32 whatever the job's
  // precision), over 4M parameters.
  const size_t n = size_t{1} << 22;
  device::DeviceArray<float> params(mem, n), m(mem, n), v(mem, n), grads(mem, n);
  for (auto* a : {&params, &m, &v, &grads}) a->zero();
  const double update = least_ms(mem, sweep.reps, [&] {
    k.adamw_update(params.data(), m.data(), v.data(), grads.data(), n, model::AdamWStep{});
  });
  table.optimizer_ns_per_param = update * 1e6 / double(n);
  const double copy = least_ms(mem, sweep.reps, [&] { mem.copy(m.data(), params.data(), n * sizeof(float)); });
  table.copy_gbps = copy > 0 ? 2.0 * n * sizeof(float) / (copy * 1e-3) / 1e9 : 0;  // read + write
  say(fmt::format("optimizer {:.3g} ns per parameter; device copy {:.4g} GB/s", table.optimizer_ns_per_param,
                  table.copy_gbps));
  if (mem.is_host()) return;
  std::vector<float> host(n, 0.0f);
  const double up = least_ms(mem, sweep.reps, [&] { mem.upload(params.data(), host.data(), n * sizeof(float)); });
  const double down = least_ms(mem, sweep.reps, [&] { mem.download(host.data(), params.data(), n * sizeof(float)); });
  table.upload_gbps = up > 0 ? n * sizeof(float) / (up * 1e-3) / 1e9 : 0;
  table.download_gbps = down > 0 ? n * sizeof(float) / (down * 1e-3) / 1e9 : 0;
  // One small operation queued and run, the device idle before it: what each kernel launch
  // costs at least (the per-op overhead a step of many small kernels pays).
  constexpr int kLaunches = 200;
  const double launches = least_ms(mem, sweep.reps, [&] {
    for (int i = 0; i < kLaunches; ++i) mem.zero(m.data(), sizeof(float));
  });
  table.launch_us = launches * 1e3 / kLaunches;
  say(fmt::format("host to device {:.4g} GB/s, device to host {:.4g} GB/s, launch {:.3g} us", table.upload_gbps,
                  table.download_gbps, table.launch_us));
}

}  // namespace holmes::tools
