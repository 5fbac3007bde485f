// Makes sure OpenBLAS runs its fastest kernels for this CPU (see blas_core.cpp for why).
#pragma once

#include <string>

namespace holmes::model::cpu {

// Idempotent and thread-safe; call before the first GEMM (the CPU kernel factory does). Returns
// the OpenBLAS core in use, e.g. "SkylakeX (OpenBLAS detected Prescott)".
const std::string& ensure_fast_blas();

}  // namespace holmes::model::cpu
