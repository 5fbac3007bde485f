// Document masking on the cudnn attention method (bf16) against the CPU twins, on a GPU:
//   - the document bias kernel (attention_bias.hpp) bit for bit against document_bias_reference;
//   - each document-masked cuDNN graph (cudnn_sdpa.hpp: kDocumentBound, kDocumentBias) that the
//     GPU's cuDNN serves, forward and backward, against model/cpu attention with the same
//     positions: aligned and odd T, grouped-query heads, several documents per sequence with
//     one of a single token and one spanning the whole sequence; outputs poisoned with NaN;
//     two backward runs bit for bit; and each document's rows against that document run alone
//     (causal attention on its tokens only, CPU);
//   - Attention::plan(document_mask) taking cudnn where cuDNN serves a masked graph, and its
//     forward and backward with positions and without.
// The GPU-free halves (the graphs' meaning, the bias twin): attention_graph_test.cpp. Skips
// without a GPU.
#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <vector>

#include "cuda/attention.hpp"
#include "cuda/attention_bias.hpp"
#include "cuda/attention_plan.hpp"
#include "cuda/check.hpp"
#include "cuda/cudnn_api.hpp"
#include "cuda/cudnn_sdpa.hpp"
#include "cuda/device_buffer.hpp"
#include "cuda_test_util.hpp"
#include "model/cpu/cpu_ops.hpp"

using namespace holmes::cuda;
using namespace holmes::cuda::test;
using holmes::DType;

namespace {

using Shape = AttentionShape;
// Aligned (HS 64), odd T (200, 77: no multiple of 64 or 128), grouped-query (4 on 2, 8 on 2).
constexpr Shape kShapes[] = {{2, 128, 128, 2, 2}, {3, 200, 256, 4, 2}, {2, 256, 512, 8, 2}, {2, 77, 128, 2, 1}};

// Row 0 is one document over the whole sequence; the others hold several, among them one of a
// single token.
std::vector<int> positions(int B, int T) { return document_positions(B, T, {T, 5, 1, 17}); }

// The CPU twin's masked attention of one shape: out, dqkv (inputs bf16-rounded already).
struct Reference {
  std::vector<float> out, dqkv;
};
Reference cpu_masked(const Shape& s, const std::vector<float>& qkv, const std::vector<float>& dout,
                     const std::vector<int>& pos) {
  Reference r{std::vector<float>(std::size_t(s.B) * s.T * s.C), std::vector<float>(qkv.size())};
  std::vector<float> att(std::size_t(s.B) * s.NH * s.T * s.T), scratch(att.size());
  holmes::model::cpu::attention_forward(r.out.data(), att.data(), qkv.data(), s.B, s.T, s.C, s.NH, s.KVH, pos.data());
  holmes::model::cpu::attention_backward(r.dqkv.data(), scratch.data(), dout.data(), qkv.data(), att.data(), s.B,
                                         s.T, s.C, s.NH, s.KVH);
  return r;
}

// Each document of `pos` run alone (B=1, T=its length, causal, no positions) on the CPU; its
// out and dqkv rows must equal the masked GPU's rows of that document.
void check_documents_alone(const Shape& s, const std::vector<float>& qkv, const std::vector<float>& dout,
                           const std::vector<int>& pos, const std::vector<float>& got_out,
                           const std::vector<float>& got_dqkv) {
  const std::size_t W = s.W(), C = s.C;
  int checked = 0;
  for (int b = 0; b < s.B; ++b)
    for (int t0 = 0; t0 < s.T;) {
      int n = 1;
      while (t0 + n < s.T && pos[b * s.T + t0 + n] != 0) ++n;
      const std::size_t r0 = std::size_t(b) * s.T + t0;
      const std::vector<float> q(qkv.begin() + r0 * W, qkv.begin() + (r0 + n) * W);
      const std::vector<float> d(dout.begin() + r0 * C, dout.begin() + (r0 + n) * C);
      std::vector<float> out(n * C), att(std::size_t(s.NH) * n * n), scratch(att.size()), dq(n * W);
      holmes::model::cpu::attention_forward(out.data(), att.data(), q.data(), 1, n, s.C, s.NH, s.KVH);
      holmes::model::cpu::attention_backward(dq.data(), scratch.data(), d.data(), q.data(), att.data(), 1, n, s.C,
                                             s.NH, s.KVH);
      INFO("row " << b << " document at " << t0 << " of " << n << " tokens");
      CHECK(normalized_error({got_out.begin() + r0 * C, got_out.begin() + (r0 + n) * C}, out) <= 1e-2);
      CHECK(normalized_error({got_dqkv.begin() + r0 * W, got_dqkv.begin() + (r0 + n) * W}, dq) <= 2e-2);
      t0 += n;
      ++checked;
    }
  CHECK(checked > s.B);  // several documents per sequence
}

// One document-masked cuDNN graph on one shape through CudnnSdpa, against the CPU twin.
// Returns false (with the reason printed) when this cuDNN serves no such graph.
bool check_sdpa_masked(SdpaMask mask, const Shape& s) {
  INFO(sdpa_mask_name(mask) << " B=" << s.B << " T=" << s.T << " C=" << s.C << " NH=" << s.NH << " KVH=" << s.KVH);
  CudnnSdpa sdpa;
  std::string why = sdpa.prepare(false, s.B, s.T, s.C, s.NH, s.KVH, mask);
  if (why.empty()) why = sdpa.prepare(true, s.B, s.T, s.C, s.NH, s.KVH, mask);
  if (!why.empty()) {
    std::printf("cuDNN %ld serves no %s graph for B=%d T=%d C=%d NH=%d KVH=%d: %s\n", cudnn_version(),
                sdpa_mask_name(mask), s.B, s.T, s.C, s.NH, s.KVH, why.c_str());
    return false;
  }
  const std::size_t n_qkv = std::size_t(s.B) * s.T * s.W(), n_out = std::size_t(s.B) * s.T * s.C;
  auto qkv = random_floats(n_qkv, 71 + s.T, -2.f, 2.f), dout = random_floats(n_out, 72 + s.T);
  const std::vector<std::uint16_t> qkv_bits = round_to_bf16(qkv), dout_bits = round_to_bf16(dout);
  const std::vector<int> pos = positions(s.B, s.T);
  const Reference want = cpu_masked(s, qkv, dout, pos);
  DeviceBuffer g_pos = to_device(pos), g_qkv = to_device(qkv_bits), g_dout = to_device(dout_bits);
  DeviceBuffer g_bias;
  const void* input = g_pos.data();
  if (mask == SdpaMask::kDocumentBias) {
    g_bias = nan_buffer(document_bias_bytes(s.B, s.T));
    document_bias(g_bias.as<bf16>(), g_pos.as<int>(), s.B, s.T, nullptr);
    input = g_bias.data();
  }
  DeviceBuffer g_out = nan_buffer(n_out * 2), g_stats = nan_buffer(std::size_t(s.B) * s.NH * s.T * 4);
  sdpa.forward(g_out.data(), g_stats.as<float>(), g_qkv.data(), s.B, s.T, s.C, s.NH, s.KVH, nullptr, mask, input);
  const std::vector<float> got_out = download_values(g_out, n_out, true);
  CHECK(normalized_error(got_out, want.out) <= 1e-2);
  std::vector<std::vector<std::uint16_t>> runs;
  for (int run = 0; run < 2; ++run) {
    DeviceBuffer g_dqkv = nan_buffer(n_qkv * 2);
    sdpa.backward(g_dqkv.data(), g_dout.data(), g_qkv.data(), g_out.data(), g_stats.as<float>(), s.B, s.T, s.C,
                  s.NH, s.KVH, nullptr, mask, input);
    const std::vector<float> got = download_values(g_dqkv, n_qkv, true);
    CHECK(normalized_error(got, want.dqkv) <= 2e-2);
    if (run == 0) check_documents_alone(s, qkv, dout, pos, got_out, got);
    runs.push_back(to_host<std::uint16_t>(g_dqkv, n_qkv));
  }
  CHECK(runs[0] == runs[1]);
  return true;
}

bool cudnn_or_skip() {
  std::string why;
  if (cudnn_available(&why)) return true;
  std::printf("HOLMES_SKIP: cuDNN not loadable (%s)\n", why.c_str());
  return false;
}

}  // namespace

TEST_CASE("the document bias kernel equals its CPU twin bit for bit", "[cuda][attention][document_mask]") {
  if (!gpu_or_skip()) return;
  for (auto [B, T] : {std::pair{2, 128}, std::pair{3, 77}, std::pair{1, 1}}) {
    INFO("B=" << B << " T=" << T);
    const std::vector<int> pos = positions(B, T);
    std::vector<std::uint16_t> want(std::size_t(B) * T * T);
    document_bias_reference(want.data(), pos.data(), B, T);
    DeviceBuffer g_pos = to_device(pos), g_bias = nan_buffer(document_bias_bytes(B, T));
    document_bias(g_bias.as<bf16>(), g_pos.as<int>(), B, T, nullptr);
    HOLMES_CUDA_CHECK(cudaDeviceSynchronize());
    CHECK(to_host<std::uint16_t>(g_bias, want.size()) == want);
  }
}

TEST_CASE("document-masked cuDNN attention (bf16) equals the CPU twin and each document alone",
          "[cuda][attention][document_mask]") {
  if (!gpu_or_skip() || !cudnn_or_skip()) return;
  for (const Shape& s : kShapes) {
    const std::string limit = cudnn_attention_limits(cudnn_version(), s.T, s.HS());
    if (!limit.empty()) {
      WARN("cuDNN " << cudnn_version() << " skips T=" << s.T << ": " << limit);
      continue;
    }
    // Attention takes the first form served; every form a cuDNN serves must be right.
    const bool bound = check_sdpa_masked(SdpaMask::kDocumentBound, s);
    const bool bias = check_sdpa_masked(SdpaMask::kDocumentBias, s);
    INFO("B=" << s.B << " T=" << s.T << " C=" << s.C << " NH=" << s.NH << " KVH=" << s.KVH);
    CHECK((bound || bias));  // Hopper's fused engines take a bias (cuDNN's documented input)
  }
}

TEST_CASE("a document-masked bf16 plan takes cuDNN and masks with the positions it is given",
          "[cuda][attention][document_mask]") {
  if (!gpu_or_skip() || !cudnn_or_skip()) return;
  const Shape s{2, 256, 512, 8, 2};
  if (!cudnn_attention_limits(cudnn_version(), s.T, s.HS()).empty()) {
    std::printf("HOLMES_SKIP: cuDNN %ld: %s\n", cudnn_version(),
                cudnn_attention_limits(cudnn_version(), s.T, s.HS()).c_str());
    return;
  }
  for (Attention::Method force : {Attention::Method::kAuto, Attention::Method::kCudnn}) {
    Attention gpu(nullptr, force);
    const auto plan = gpu.plan(DType::kBf16, s.B, s.T, s.C, s.NH, s.KVH, /*document_mask=*/true);
    INFO(plan.method);
    std::printf("document mask plan: %s\n", plan.method.c_str());  // scripts/gpu_check.sh reports it
    REQUIRE(gpu.method(DType::kBf16) == Attention::Method::kCudnn);
    CHECK_THAT(plan.method, Catch::Contains("documents masked"));
    CHECK_FALSE(plan.probabilities);
    CHECK(plan.state_floats == std::size_t(s.B) * s.NH * s.T);
    const std::size_t n_qkv = std::size_t(s.B) * s.T * s.W(), n_out = std::size_t(s.B) * s.T * s.C;
    auto qkv = random_floats(n_qkv, 81, -2.f, 2.f), dout = random_floats(n_out, 82);
    const std::vector<std::uint16_t> qkv_bits = round_to_bf16(qkv), dout_bits = round_to_bf16(dout);
    const std::vector<int> pos = positions(s.B, s.T);
    // With positions: the masked twin; without (pos all 0 .. T-1 is the causal case): causal.
    std::vector<int> causal(pos.size());
    for (std::size_t i = 0; i < causal.size(); ++i) causal[i] = int(i % s.T);
    DeviceBuffer g_pos = to_device(pos), g_qkv = to_device(qkv_bits), g_dout = to_device(dout_bits);
    for (bool masked : {true, false}) {
      INFO((masked ? "with positions" : "without positions"));
      const Reference want = cpu_masked(s, qkv, dout, masked ? pos : causal);
      const int* dpos = masked ? g_pos.as<int>() : nullptr;
      DeviceBuffer g_out = nan_buffer(n_out * 2), g_att = nan_buffer(plan.state_floats * 4);
      DeviceBuffer g_dqkv = nan_buffer(n_qkv * 2), g_scratch = nan_buffer(4);
      gpu.forward(g_out.as<bf16>(), g_att.as<float>(), g_qkv.as<bf16>(), s.B, s.T, s.C, s.NH, s.KVH, dpos);
      CHECK(normalized_error(download_values(g_out, n_out, true), want.out) <= 1e-2);
      gpu.backward(g_dqkv.as<bf16>(), g_scratch.as<float>(), g_dout.as<bf16>(), g_qkv.as<bf16>(), g_out.as<bf16>(),
                   g_att.as<float>(), s.B, s.T, s.C, s.NH, s.KVH, dpos);
      CHECK(normalized_error(download_values(g_dqkv, n_qkv, true), want.dqkv) <= 2e-2);
    }
  }
  // A plan without document_mask refuses positions rather than ignore them.
  Attention plain(nullptr, Attention::Method::kCudnn);
  plain.plan(DType::kBf16, s.B, s.T, s.C, s.NH, s.KVH);
  DeviceBuffer g_pos = to_device(positions(s.B, s.T)), g_qkv = nan_buffer(std::size_t(s.B) * s.T * s.W() * 2);
  DeviceBuffer g_out = nan_buffer(std::size_t(s.B) * s.T * s.C * 2), g_att = nan_buffer(std::size_t(s.B) * s.NH * s.T * 4);
  CHECK_THROWS_AS(plain.forward(g_out.as<bf16>(), g_att.as<float>(), g_qkv.as<bf16>(), s.B, s.T, s.C, s.NH, s.KVH,
                                g_pos.as<int>()),
                  std::logic_error);
}
