// The CUDA-enabled holmes-train must load and run on a node without the NVIDIA driver: the
// CUDA runtime is linked statically and cuBLASLt and cuDNN are dlopen'ed, so neither libcuda.so nor the
// toolkit's libraries may be load-time dependencies.
#include <array>
#include <catch2/catch.hpp>
#include <cstdio>
#include <memory>
#include <string>

#include "binary_path.hpp"

namespace {

// Runs a shell command, returns its stdout and exit status.
std::string run(const std::string& cmd, int* status) {
  std::string out;
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), pclose);
  REQUIRE(pipe != nullptr);
  std::array<char, 512> buf{};
  while (std::fgets(buf.data(), buf.size(), pipe.get())) out += buf.data();
  *status = pclose(pipe.release());
  return out;
}

}  // namespace

TEST_CASE("holmes-train has no load-time dependency on libcuda.so, cuBLAS or cuDNN", "[cuda]") {
  int status = 0;
  std::string deps = run("ldd '" + holmes_train_binary() + "' 2>&1", &status);
  INFO(deps);
  REQUIRE(status == 0);
  CHECK(deps.find("libcuda.so") == std::string::npos);
  CHECK(deps.find("libcublas") == std::string::npos);  // dlopen'ed on first GEMM instead
  CHECK(deps.find("libcudnn") == std::string::npos);   // dlopen'ed on first attention plan
  CHECK(deps.find("not found") == std::string::npos);
}

TEST_CASE("holmes-train starts whether or not a GPU is present", "[cuda]") {
  int status = 0;
  std::string out = run("'" + holmes_train_binary() + "' --version 2>&1", &status);
  INFO(out);
  CHECK(status == 0);
  CHECK(out.find("holmes-train") != std::string::npos);
}
