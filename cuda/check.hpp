// CudaError and the check macros every CUDA call in cuda/ goes through. engine/spec is not a
// dependency of cuda/, so the error type lives here; main reports it as a runtime failure
// (exit 1) because it derives from std::runtime_error, not from UserError.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

namespace holmes::cuda {

// A failed CUDA runtime or cuBLAS(Lt) call: the library's code name, its text, the source
// expression and where it was evaluated.
class CudaError : public std::runtime_error {
 public:
  CudaError(std::string code_name, const std::string& detail, std::string expr, std::string file,
            int line);
  const std::string& code_name() const { return code_name_; }  // e.g. "cudaErrorNoDevice"
  const std::string& expr() const { return expr_; }
  const std::string& file() const { return file_; }
  int line() const { return line_; }

 private:
  std::string code_name_, expr_, file_;
  int line_;
};

// Throw CudaError when `code` is not success. Out of line so the macros stay small.
void check_cuda(cudaError_t code, const char* expr, const char* file, int line);
void check_cublas(cublasStatus_t code, const char* expr, const char* file, int line);

}  // namespace holmes::cuda

#define HOLMES_CUDA_CHECK(expr) ::holmes::cuda::check_cuda((expr), #expr, __FILE__, __LINE__)
#define HOLMES_CUBLAS_CHECK(expr) ::holmes::cuda::check_cublas((expr), #expr, __FILE__, __LINE__)
