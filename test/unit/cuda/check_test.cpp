// Tests that run on every CUDA build, GPU or not: the error type, the device query on a
// machine without a driver, and GEMM shape validation (no GPU is touched before it).
#include "cuda/check.hpp"

#include <catch2/catch.hpp>

#include "cuda/device.hpp"
#include "cuda/gemm.hpp"
#include "gemm_reference.hpp"

using namespace holmes::cuda;

TEST_CASE("HOLMES_CUDA_CHECK throws CudaError with code, expression and location", "[cuda]") {
  try {
    HOLMES_CUDA_CHECK(cudaErrorInvalidValue);
    FAIL("no exception");
  } catch (const CudaError& e) {
    std::string what = e.what();
    CHECK(e.code_name() == "cudaErrorInvalidValue");
    CHECK(e.expr() == "cudaErrorInvalidValue");
    CHECK(e.line() > 0);
    CHECK(what.find("check_test.cpp:") != std::string::npos);
    CHECK(what.find("cudaErrorInvalidValue") != std::string::npos);
  }
  CHECK_NOTHROW(HOLMES_CUDA_CHECK(cudaSuccess));
}

TEST_CASE("HOLMES_CUBLAS_CHECK names the cuBLAS status", "[cuda]") {
  try {
    HOLMES_CUBLAS_CHECK(CUBLAS_STATUS_NOT_SUPPORTED);
    FAIL("no exception");
  } catch (const CudaError& e) {
    CHECK(e.code_name() == "CUBLAS_STATUS_NOT_SUPPORTED");
    CHECK(std::string(e.what()).find("CUBLAS_STATUS_NOT_SUPPORTED") != std::string::npos);
  }
  CHECK_NOTHROW(HOLMES_CUBLAS_CHECK(CUBLAS_STATUS_SUCCESS));
}

TEST_CASE("query_gpus never throws and explains an empty answer", "[cuda]") {
  std::string why = "stale";
  std::vector<GpuInfo> gpus;
  REQUIRE_NOTHROW(gpus = query_gpus(&why));
  if (gpus.empty()) {
    CHECK(!why.empty());
    CHECK(why != "stale");
  } else {
    CHECK(why.empty());
    for (std::size_t i = 0; i < gpus.size(); ++i) {
      CHECK(gpus[i].index == int(i));
      CHECK(!gpus[i].name.empty());
      CHECK(gpus[i].memory_bytes > 0);
      CHECK(gpus[i].cc_major >= 5);
      CHECK(gpus[i].sm_count > 0);
    }
  }
  CHECK_NOTHROW(query_gpus());  // a null reason pointer is allowed
}

TEST_CASE("validate_gemm rejects impossible shapes naming the field", "[cuda]") {
  GemmShape s;
  s.m = 4;
  s.n = 5;
  s.k = 6;
  CHECK_NOTHROW(validate_gemm(s));
  const auto message_of = test::validate_message;
  GemmShape zero_k = s;
  zero_k.k = 0;
  CHECK_THAT(message_of(zero_k), Catch::Contains("k = 0"));
  GemmShape batch_bias = s;
  batch_bias.batch = 2;
  batch_bias.stride_c = 20;
  batch_bias.bias = true;
  CHECK_THAT(message_of(batch_bias), Catch::Contains("with bias"));
  GemmShape overlap = s;
  overlap.batch = 3;
  overlap.stride_c = 19;  // < m*n = 20: batches would overwrite each other
  CHECK_THAT(message_of(overlap), Catch::Contains("stride_c = 19"));
  GemmShape tf32_bf16 = s;
  tf32_bf16.ab_type = DType::kBf16;
  tf32_bf16.fast_tf32 = true;
  CHECK_THAT(message_of(tf32_bf16), Catch::Contains("f32 inputs only"));
  GemmShape f32_to_bf16 = s;  // cuBLASLt has no fp32-input GEMM writing bf16
  f32_to_bf16.c_type = DType::kBf16;
  CHECK_THAT(message_of(f32_to_bf16), Catch::Contains("c_type bf16 with f32 inputs"));
}

TEST_CASE("GemmRunner rejects a bad shape before touching the GPU", "[cuda]") {
  GemmRunner runner;  // lazy: constructing needs no GPU
  GemmShape s;
  s.m = -1;
  s.n = s.k = 2;
  CHECK_THROWS_AS(runner.run(nullptr, nullptr, nullptr, nullptr, s, 1.f, 0.f),
                  std::invalid_argument);
  s.m = 2;
  s.bias = true;  // bias promised but not given
  float fake[4];  // never dereferenced: validation happens first
  CHECK_THROWS_WITH(runner.run(fake, fake, fake, nullptr, s, 1.f, 0.f),
                    Catch::Contains("null device pointer"));
  CHECK(runner.cached_plans() == 0);
}

TEST_CASE("gemm_self_test passes on a GPU and explains itself without one", "[cuda]") {
  std::string why;
  bool have_gpu = !query_gpus(&why).empty();
  std::string result;
  REQUIRE_NOTHROW(result = gemm_self_test(0));
  if (have_gpu) {
    CHECK(result.empty());
    CHECK_THAT(gemm_self_test(999), Catch::Contains("out of range"));
  } else {
    CHECK_THAT(result, Catch::StartsWith("no CUDA device: "));
  }
}
