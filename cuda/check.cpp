#include "cuda/check.hpp"

#include <fmt/format.h>

namespace holmes::cuda {

namespace {

std::string base_name(const std::string& path) {
  auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// cuBLAS status names, kept here so reporting an error never needs the (dlopen'ed) library.
const char* cublas_status_name(cublasStatus_t code) {
  switch (code) {
    case CUBLAS_STATUS_SUCCESS:
      return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR:
      return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR:
      return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR:
      return "CUBLAS_STATUS_LICENSE_ERROR";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

const char* cublas_status_text(cublasStatus_t code) {
  switch (code) {
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "library not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "invalid value or unsupported parameter combination";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "feature absent on this GPU architecture";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "GPU program failed to execute";
    case CUBLAS_STATUS_INTERNAL_ERROR:
      return "internal cuBLAS operation failed";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "operation not supported";
    default:
      return "see the cuBLAS documentation";
  }
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
  throw CudaError(cublas_status_name(code),
                  fmt::format("{}, code {}", cublas_status_text(code), int(code)), expr, file,
                  line);
}

}  // namespace holmes::cuda
