// The GPU-free parts of attention planning (cuda/attention_plan.hpp) and of the cuDNN graphs:
// HOLMES_ATTENTION parsing, shape validation, the in-place head strides of Q, K, V and out,
// cuDNN's limits, the state and scratch sizes per method, and that every descriptor of the
// fused-attention graphs finalizes (cuDNN accepts them without a GPU; only the operation graph
// needs one).
#include <catch2/catch.hpp>

#include <tuple>

#include "common/errors.hpp"
#include "cuda/attention.hpp"
#include "cuda/attention_plan.hpp"
#include "cuda/cudnn_api.hpp"
#include "cuda/cudnn_graph.hpp"
#include "cuda/cudnn_sdpa.hpp"

using namespace holmes::cuda;
using holmes::DType;

TEST_CASE("HOLMES_ATTENTION names a method or is refused with the accepted values",
          "[cuda][attention]") {
  CHECK_FALSE(parse_attention_env(nullptr).has_value());
  CHECK_FALSE(parse_attention_env("").has_value());
  CHECK(parse_attention_env("cudnn") == AttentionMethod::kCudnn);
  CHECK(parse_attention_env("fallback") == AttentionMethod::kFallback);
  CHECK(parse_attention_env("exact") == AttentionMethod::kExact);
  for (const char* bad : {"auto", "CUDNN", "flash", " exact"}) {
    INFO(bad);
    CHECK_THROWS_AS(parse_attention_env(bad), holmes::UserError);
    CHECK_THROWS_WITH(parse_attention_env(bad),
                      Catch::Contains("HOLMES_ATTENTION") && Catch::Contains(bad) &&
                          Catch::Contains("cudnn, fallback, exact"));
  }
}

TEST_CASE("attention shapes are validated before any method is chosen", "[cuda][attention]") {
  CHECK_NOTHROW(validate_attention_shape(3, 37, 80, 5, 5));
  CHECK_NOTHROW(validate_attention_shape(3, 37, 80, 5, 1));
  CHECK_THROWS_WITH(validate_attention_shape(0, 37, 80, 5, 5), Catch::Contains("B (micro-batch) = 0"));
  CHECK_THROWS_WITH(validate_attention_shape(1, -1, 80, 5, 5), Catch::Contains("T (sequence length)"));
  CHECK_THROWS_WITH(validate_attention_shape(1, 8, 80, 0, 1), Catch::Contains("NH (heads) = 0"));
  CHECK_THROWS_WITH(validate_attention_shape(1, 8, 81, 5, 5),
                    Catch::Contains("C = 81 is not a multiple of NH = 5"));
  CHECK_THROWS_WITH(validate_attention_shape(1, 8, 80, 4, 3),
                    Catch::Contains("NH = 4 query heads is not a multiple of KVH = 3"));
  CHECK_THROWS_WITH(validate_attention_shape(1, 8, 80, 4, 0), Catch::Contains("KVH (key/value heads) = 0"));
  // plan() validates first, so this needs no GPU.
  Attention a(nullptr, Attention::Method::kExact);
  CHECK_THROWS_AS(a.plan(holmes::DType::kF32, 2, 16, 30, 4, 4), holmes::UserError);
  CHECK(a.method(holmes::DType::kF32) == Attention::Method::kAuto);
}

TEST_CASE("forced methods that cannot serve a precision are refused", "[cuda][attention]") {
  Attention cudnn32(nullptr, Attention::Method::kCudnn);
  CHECK_THROWS_WITH(cudnn32.plan(holmes::DType::kF32, 1, 64, 64, 1, 1), Catch::Contains("bf16 only"));
  Attention exact16(nullptr, Attention::Method::kExact);
  CHECK_THROWS_WITH(exact16.plan(holmes::DType::kBf16, 1, 64, 64, 1, 1), Catch::Contains("fp32 only"));
  // Both need no GPU and cost nothing: the fallback and exact plans are pure arithmetic.
  Attention fallback(nullptr, Attention::Method::kFallback);
  auto p = fallback.plan(holmes::DType::kBf16, 2, 8, 16, 2, 2);
  CHECK(p.state_floats == 2 * 2 * 8 * 8 / 2);
  CHECK_THAT(p.method, Catch::StartsWith("fallback"));
  CHECK(fallback.method(holmes::DType::kBf16) == Attention::Method::kFallback);
  CHECK(fallback.method(holmes::DType::kF32) == Attention::Method::kAuto);
}

TEST_CASE("Q, K, V and out are viewed in place with head strides", "[cuda][attention]") {
  const int B = 3, T = 37, C = 80, NH = 5, HS = 16;
  for (int part = 0; part < 3; ++part) {
    HeadView v = qkv_view(B, T, C, NH, NH, part);
    CHECK(v.dims == std::array<std::int64_t, 4>{B, NH, T, HS});
    CHECK(v.strides == std::array<std::int64_t, 4>{T * 3 * C, HS, 3 * C, 1});
    CHECK(v.offset == part * C);
    // Element (b, h, t, d) lands where the model's layout puts it: qkv[(b*T+t)*3C + part*C +
    // h*HS + d].
    for (int b : {0, 2})
      for (int h : {0, 4})
        for (int t : {0, 36})
          for (int d : {0, 15}) {
            std::int64_t at = v.offset + b * v.strides[0] + h * v.strides[1] + t * v.strides[2] +
                              d * v.strides[3];
            CHECK(at == (std::int64_t(b) * T + t) * 3 * C + part * C + h * HS + d);
          }
  }
  HeadView o = out_view(B, T, C, NH);
  CHECK(o.strides == std::array<std::int64_t, 4>{T * C, HS, C, 1});
  CHECK(o.offset == 0);
  CHECK(o.offset + 2 * o.strides[0] + 4 * o.strides[1] + 36 * o.strides[2] + 15 ==
        (2 * T + 36) * C + 4 * HS + 15);
}

TEST_CASE("cuDNN attention limits: version, head size, T on old releases", "[cuda][attention]") {
  CHECK(cudnn_attention_limits(91900, 37, 16).empty());
  CHECK(cudnn_attention_limits(91900, 1024, 64).empty());
  CHECK(cudnn_attention_limits(91600, 37, 128).empty());
  CHECK_THAT(cudnn_attention_limits(89000, 1024, 64), Catch::Contains("older than 9.0"));
  CHECK_THAT(cudnn_attention_limits(91900, 64, 12), Catch::Contains("head size 12"));
  CHECK_THAT(cudnn_attention_limits(91900, 64, 136), Catch::Contains("head size 136"));
  CHECK_THAT(cudnn_attention_limits(91500, 37, 64), Catch::Contains("T = 37"));
  CHECK(cudnn_attention_limits(90100, 1024, 64).empty());
  // 9.10.0 and 9.10.1 have known bf16 attention bugs (cudnn-frontend refuses them too).
  CHECK_THAT(cudnn_attention_limits(91000, 1024, 64), Catch::Contains("9.10.2"));
  CHECK_THAT(cudnn_attention_limits(91001, 1024, 64), Catch::Contains("9.10.2"));
  CHECK(cudnn_attention_limits(91002, 1024, 64).empty());
  // cudnn-frontend refuses the backward for s_q = s_kv = 1; T = 2 is fine.
  CHECK_THAT(cudnn_attention_limits(91900, 1, 64), Catch::Contains("T = 1"));
  CHECK(cudnn_attention_limits(91900, 2, 64).empty());
}

TEST_CASE("state and scratch sizes per method and precision", "[cuda][attention]") {
  const int B = 3, T = 37, NH = 5;
  const std::size_t rows = B * NH * T, probs = rows * T;
  auto s = attention_sizes(AttentionMethod::kCudnn, holmes::DType::kBf16, B, T, NH);
  CHECK(s.state_floats == rows);
  CHECK(s.scratch_floats == 0);
  s = attention_sizes(AttentionMethod::kFallback, holmes::DType::kBf16, B, T, NH);
  CHECK(s.state_floats == (probs + 1) / 2);  // odd count: bf16 probabilities, rounded up
  CHECK(s.scratch_floats == probs + (probs + 1) / 2);
  s = attention_sizes(AttentionMethod::kFallback, holmes::DType::kF32, B, T, NH);
  CHECK(s.state_floats == probs);
  CHECK(s.scratch_floats == probs);
  s = attention_sizes(AttentionMethod::kExact, holmes::DType::kF32, B, T, NH);
  CHECK(s.state_floats == probs);
  CHECK(s.scratch_floats == probs);
}

TEST_CASE("cuDNN loads lazily and names its errors", "[cuda][attention]") {
  std::string why = "stale";
  REQUIRE(cudnn_available(&why));  // the toolkit this was built with ships cuDNN 9
  CHECK(why.empty());
  CHECK(cudnn_version() / 10000 == CUDNN_MAJOR);
  CHECK_THAT(cudnn_path(), Catch::Contains("libcudnn.so"));
  CHECK_THROWS_WITH(check_cudnn(CUDNN_STATUS_BAD_PARAM, "cudnnSomething(x)", "f.cpp", 7),
                    Catch::Contains("CUDNN_STATUS_BAD_PARAM") &&
                        Catch::Contains("cudnnSomething(x)"));
  CHECK_NOTHROW(check_cudnn(CUDNN_STATUS_SUCCESS, "ok", "f.cpp", 1));
}

TEST_CASE("every descriptor of the cuDNN attention graphs finalizes", "[cuda][attention]") {
  REQUIRE(cudnn_available());
  struct Shape {
    int B, T, C, NH;
  };
  for (Shape s : {Shape{3, 37, 80, 5}, Shape{2, 64, 128, 2}, Shape{1, 1024, 768, 12}}) {
    INFO("B=" << s.B << " T=" << s.T << " C=" << s.C << " NH=" << s.NH);
    CudnnGraphBuilder fwd;
    REQUIRE_NOTHROW(build_sdpa_graph(fwd, false, s.B, s.T, s.C, s.NH, s.NH));
    // matmul, scale, causal mask (2 indices, compare, select), softmax with stats (max, sub,
    // exp, sum, log, add, div), matmul.
    CHECK(fwd.operation_count() == 14);
    // Q, K, V, O, stats, scale, lowest.
    CHECK(fwd.bound_uids().size() == 7);
    for (int form = 0; form < kBackwardForms; ++form) {
      INFO("backward form " << form);
      CudnnGraphBuilder bwd;
      REQUIRE_NOTHROW(build_sdpa_graph(bwd, true, s.B, s.T, s.C, s.NH, s.NH, form));
      // D = rowsum(dO*O) (3), recomputed P (scores 6, sub, exp), dV (reshape, matmul),
      // dS (matmul, sub, mul, mul), dK (reshape, matmul), dQ (reshape, matmul).
      CHECK(bwd.operation_count() == 21);
      // Q, K, V, O, dO, stats, dQ, dK, dV, 1, scale, lowest, and D when in the workspace.
      CHECK(bwd.bound_uids().size() == (form == 2 ? 12u : 13u));
    }
    CudnnGraphBuilder none;
    CHECK_THROWS_AS(build_sdpa_graph(none, true, s.B, s.T, s.C, s.NH, s.NH, kBackwardForms),
                    std::invalid_argument);
  }
}

TEST_CASE("the grouped-query cuDNN attention graphs finalize, dK and dV reduced over each group",
          "[cuda][attention]") {
  REQUIRE(cudnn_available());
  // Llama 3 8B's heads on one tensor-parallel rank of 4 (8 query heads on 2 key/value heads,
  // HS 128) and multi-query attention (one key/value head).
  for (auto [B, T, C, NH, KVH] : {std::tuple{1, 256, 1024, 8, 2}, std::tuple{2, 64, 256, 4, 1}}) {
    INFO("B=" << B << " T=" << T << " C=" << C << " NH=" << NH << " KVH=" << KVH);
    CudnnGraphBuilder fwd;
    REQUIRE_NOTHROW(build_sdpa_graph(fwd, false, B, T, C, NH, KVH));
    CHECK(fwd.operation_count() == 14);  // as multi-head: the products broadcast K and V
    for (int form = 0; form < kBackwardForms; ++form) {
      INFO("backward form " << form);
      CudnnGraphBuilder bwd;
      REQUIRE_NOTHROW(build_sdpa_graph(bwd, true, B, T, C, NH, KVH, form));
      CHECK(bwd.operation_count() == 23);  // multi-head's 21 and one reduction each for dK, dV
    }
  }
  // K and V are viewed with KVH heads after the NH query heads.
  const HeadView k = qkv_view(2, 5, 64, 8, 2, 1), v = qkv_view(2, 5, 64, 8, 2, 2);
  CHECK(k.dims == std::array<std::int64_t, 4>{2, 2, 5, 8});
  CHECK(k.strides == std::array<std::int64_t, 4>{5 * 96, 8, 96, 1});
  CHECK(k.offset == 64);
  CHECK(v.offset == 64 + 16);
  CHECK_THROWS_AS(validate_attention_shape(1, 4, 64, 8, 3), holmes::UserError);
}

// An H100 SXM as cuDNN describes a device (CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR's JSON; values
// from the data sheet and cudaDeviceProp of an H100 80GB HBM3).
static const char* kH100Json =
    R"({"maxGridSize":[2147483647,65535,65535],"maxBlockSize":[1024,1024,64],)"
    R"("regsPerBlock":65536,"multiProcessorCount":132,"warpSize":32,)"
    R"("maxSharedMemoryPerBlock":49152,"maxSharedMemoryPerBlockOptin":232448,)"
    R"("reservedSharedMemoryPerBlock":1024,"maxRegistersPerSM":65536,"maxCtasPerSM":32,)"
    R"("maxThreadsPerBlock":1024,"maxThreadsPerSM":2048,"pciDeviceId":0,"isTccDriver":0,)"
    R"("supportCoopLaunch":1,"totalGlobalMem":85520809984,"smClockRateKHz":1980000,)"
    R"("memClockRateKHz":2619000,"l2CacheSize":52428800,"cudaDeviceId":0,"deviceVer":900,)"
    R"("driverVer":13000,"deviceName":"NVIDIA H100 80GB HBM3"})";

// cuDNN 9.8 and later describe a device without one (the offline cases below). Not a skip when
// it cannot: on a GPU machine with an older cuDNN the parity tests check more than these.
static bool cudnn_describes_devices() {
  REQUIRE(cudnn_available());
  if (cudnn_version() >= 90800) return true;
  WARN("cuDNN " << cudnn_version() << " cannot describe a device without one (needs 9.8)");
  return false;
}

TEST_CASE("cuDNN accepts the attention graphs for an H100 and proposes engines, without a GPU",
          "[cuda][attention]") {
  if (!cudnn_describes_devices()) return;
  // The whole operation graph finalizes (cuDNN checks the DAG: tensors, uids, connections) and
  // the heuristics propose engines for sm_90. That is a weak check of support: cuDNN decides
  // support when a plan is finalized, which for these runtime-compiled engines needs the
  // driver; on a GPU the parity tests do that and run them.
  for (int form = 0; form < kBackwardForms; ++form) {
    for (bool backward : {false, true}) {
      if (!backward && form > 0) continue;
      INFO((backward ? "backward form " : "forward form ") << form);
      std::int64_t proposed = 0;
      std::string why;
      REQUIRE_NOTHROW(why = check_sdpa_offline(kH100Json, backward, 16, 1024, 768, 12, 12, form,
                                               &proposed));
      INFO(why);
      CHECK(proposed > 0);
      // Grouped-query attention (Llama 3 8B on 4 tensor-parallel ranks: 8 on 2 heads of 128).
      REQUIRE_NOTHROW(why = check_sdpa_offline(kH100Json, backward, 1, 2048, 1024, 8, 2, form, &proposed));
      INFO("grouped-query: " << why);
      CHECK(proposed > 0);
    }
  }
}

TEST_CASE("the document-masked cuDNN attention graphs finalize in both mask forms", "[cuda][attention]") {
  REQUIRE(cudnn_available());
  // Multi-head, grouped-query, odd T.
  for (auto [B, T, C, NH, KVH] : {std::tuple{2, 64, 128, 2, 2}, std::tuple{1, 256, 1024, 8, 2},
                                  std::tuple{3, 37, 80, 5, 5}}) {
    INFO("B=" << B << " T=" << T << " C=" << C << " NH=" << NH << " KVH=" << KVH);
    const int gqa = NH != KVH ? 2 : 0;  // the reductions of dK and dV over each group
    // The bound form adds the document's first key (sub), a compare and an and to the causal
    // mask; the bias form one add before it. Either binds one more tensor, last.
    for (auto [mask, extra] : {std::pair{SdpaMask::kDocumentBound, 3}, std::pair{SdpaMask::kDocumentBias, 1}}) {
      INFO(sdpa_mask_name(mask));
      CudnnGraphBuilder fwd;
      REQUIRE_NOTHROW(build_sdpa_graph(fwd, false, B, T, C, NH, KVH, 0, mask));
      CHECK(fwd.operation_count() == std::size_t(14 + extra));
      REQUIRE(fwd.bound_uids().size() == 8);
      CHECK(fwd.bound_uids().back() == kSdpaMaskUid);
      for (int form = 0; form < kBackwardForms; ++form) {
        INFO("backward form " << form);
        CudnnGraphBuilder bwd;
        REQUIRE_NOTHROW(build_sdpa_graph(bwd, true, B, T, C, NH, KVH, form, mask));
        CHECK(bwd.operation_count() == std::size_t(21 + gqa + extra));
        CHECK(bwd.bound_uids().size() == (form == 2 ? 13u : 14u));
        CHECK(bwd.bound_uids().back() == kSdpaMaskUid);
      }
    }
  }
}

TEST_CASE("cuDNN finalizes the document-masked attention graphs for an H100, without a GPU",
          "[cuda][attention]") {
  if (!cudnn_describes_devices()) return;
  // Aligned (GPT-2 124M's heads at T 1024), odd T (1000: no multiple of 64 or 128) and
  // grouped-query (Llama 3 8B on 4 tensor-parallel ranks), both directions, every backward form.
  // As for the causal graphs above, what this proves is that the whole operation graph
  // finalizes for sm_90 (a miswired mask tensor, a type cuDNN refuses there or a dangling uid
  // throws): cuDNN 9.19's heuristics count the same for these as for the causal graphs (and
  // for a lone pointwise add as for a forward) and check engines only with a driver. The
  // mask's meaning: attention_graph_test.cpp.
  for (auto [B, T, C, NH, KVH] : {std::tuple{16, 1024, 768, 12, 12}, std::tuple{4, 1000, 768, 12, 12},
                                  std::tuple{1, 2048, 1024, 8, 2}}) {
    for (SdpaMask mask : {SdpaMask::kDocumentBound, SdpaMask::kDocumentBias}) {
      for (int form = 0; form < kBackwardForms; ++form) {
        for (bool backward : {false, true}) {
          if (!backward && form > 0) continue;
          INFO(sdpa_mask_name(mask) << (backward ? " backward form " : " forward form ") << form << " B=" << B
                                    << " T=" << T << " C=" << C << " NH=" << NH << " KVH=" << KVH);
          std::int64_t proposed = 0;
          std::string why;
          REQUIRE_NOTHROW(why = check_sdpa_offline(kH100Json, backward, B, T, C, NH, KVH, form, &proposed, mask));
          INFO(why);
          CHECK(proposed > 0);
          std::int64_t causal = 0;
          check_sdpa_offline(kH100Json, backward, B, T, C, NH, KVH, form, &causal);
          CHECK(proposed == causal);
        }
      }
    }
  }
}
