// The holmes-train binary the CUDA tests inspect: HOLMES_TRAIN_BINARY when set
// (scripts/gpu_check.sh runs test_cuda from a bundle far from the build folder), else the one
// this test was built beside (HOLMES_BINARY, from test/CMakeLists.txt).
#pragma once

#include <cstdlib>
#include <string>

inline std::string holmes_train_binary() {
  const char* env = std::getenv("HOLMES_TRAIN_BINARY");
  return env && *env ? env : HOLMES_BINARY;
}
