// cuDNN loaded with dlopen on first use instead of linked, as cuBLASLt is (cublaslt_api.hpp):
// the binary starts, and trains on the CPU, on machines without cuDNN. Only the graph
// (backend) API is used: cuda/cudnn_graph.cpp builds fused attention with it.
#pragma once

#include <cudnn_graph.h>

#include <string>

namespace holmes::cuda {

// The cuDNN entry points cuda/ calls, with the library's own signatures.
struct CudnnApi {
  decltype(&::cudnnGetVersion) get_version;
  decltype(&::cudnnGetErrorString) get_error_string;
  decltype(&::cudnnCreate) create;
  decltype(&::cudnnDestroy) destroy;
  decltype(&::cudnnSetStream) set_stream;
  decltype(&::cudnnBackendCreateDescriptor) create_descriptor;
  decltype(&::cudnnBackendDestroyDescriptor) destroy_descriptor;
  decltype(&::cudnnBackendSetAttribute) set_attribute;
  decltype(&::cudnnBackendGetAttribute) get_attribute;
  decltype(&::cudnnBackendFinalize) finalize;
  decltype(&::cudnnBackendExecute) execute;
};

// The loaded table. The first call opens, in order: the file named by the environment
// variable HOLMES_CUDNN_PATH (when set), libcudnn.so.<major of the headers> through the
// dynamic loader's search path (LD_LIBRARY_PATH, ...), then the toolkit's lib folder seen at
// configure time. Throws CudaError naming what was tried and why each failed.
const CudnnApi& cudnn();

// Whether cudnn() would succeed; `why` gets the reason when not. Never throws.
bool cudnn_available(std::string* why = nullptr);

// Where the library was loaded from ("" before a successful load), and its version
// (cudnnGetVersion(), e.g. 91900; 0 when not loaded).
std::string cudnn_path();
long cudnn_version();

// Throws CudaError when `status` is not success: the code's text from the loaded library
// (cudnnGetErrorString), the numeric code, the expression and where.
void check_cudnn(cudnnStatus_t status, const char* expr, const char* file, int line);

}  // namespace holmes::cuda

#define HOLMES_CUDNN_CHECK(expr) ::holmes::cuda::check_cudnn((expr), #expr, __FILE__, __LINE__)
