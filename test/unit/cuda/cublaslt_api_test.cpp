// cuBLASLt is opened with dlopen on first use. A machine that builds the CUDA backend has the
// toolkit, so the loader must find it there (through the loader path or the configure-time
// lib folder) and bind every entry point; cuBLASLt's version query needs no GPU.
#include "cuda/cublaslt_api.hpp"

#include <catch2/catch.hpp>

using namespace holmes::cuda;

TEST_CASE("cuBLASLt loads lazily and matches the headers' major version", "[cuda]") {
  std::string why = "stale";
  REQUIRE(cublaslt_available(&why));
  CHECK(why.empty());
  const CublasLtApi& api = cublaslt();
  REQUIRE(api.get_version != nullptr);
  REQUIRE(api.matmul != nullptr);
  REQUIRE(api.algo_get_heuristic != nullptr);
  std::size_t version = api.get_version();
  INFO("cublasLtGetVersion() = " << version << ", loaded from " << cublaslt_path());
  CHECK(version / 10000 == CUBLAS_VER_MAJOR);
  CHECK_THAT(cublaslt_path(), Catch::Contains("libcublasLt.so"));
}
