#include "cuda/check.hpp"

#include <fmt/format.h>

namespace holmes::cuda {

namespace {

std::string base_name(const std::string& path) {
  auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

CudaError::CudaError(std::string code_name, const std::string& detail, std::string expr,
                     std::string file, int line)
    : std::runtime_error(fmt::format("CUDA call failed: {} ({}) in `{}` at {}:{}", code_name,
                                     detail, expr, base_name(file), line)),
      code_name_(std::move(code_name)),
      expr_(std::move(expr)),
      file_(std::move(file)),
      line_(line) {}

void check_cuda(cudaError_t code, const char* expr, const char* file, int line) {
  if (code == cudaSuccess) return;
  // Clear the sticky "last error" of non-fatal failures so a later check does not re-report it.
  (void)cudaGetLastError();
  throw CudaError(cudaGetErrorName(code), cudaGetErrorString(code), expr, file, line);
}

void check_cublas(cublasStatus_t code, const char* expr, const char* file, int line) {
  if (code == CUBLAS_STATUS_SUCCESS) return;
  throw CudaError(cublasLtGetStatusName(code), cublasLtGetStatusString(code), expr, file, line);
}

}  // namespace holmes::cuda
