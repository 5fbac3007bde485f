// fp32 host implementation of model/kernels.hpp: GEMMs through OpenBLAS cblas_sgemm,
// everything else in OpenMP loops.
#pragma once

#include <memory>

#include "model/kernels.hpp"

namespace holmes::model::cpu {

// The CPU kernel set; stateless, so one instance may serve every model in the process.
std::unique_ptr<Kernels> make_cpu_kernels();

}  // namespace holmes::model::cpu
